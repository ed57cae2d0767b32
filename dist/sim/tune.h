// `poseidon plan --tune`: the options of a distributed run chosen by the
// simulator (dist/sim/simulate.h) rather than by the planner's closed forms, for
// the model, profile, rank count and link at hand. A coordinate search: from
// the config's options, each of scheme, all-reduce algorithm, bucket size,
// PS block size and send order in turn is set to whichever of its values
// simulates fastest with the others held, twice over; a value is kept only
// when it is faster than the best so far.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dist/sim/simulate.h"

namespace poseidon::dist {

struct TuneTrial {
  std::string change;  // "bucket 16 MiB", ...
  SimResult result;
};

struct TuneResult {
  DistConfig config;  // the fastest options found
  SimResult result;   // theirs
  std::vector<TuneTrial> trials;
};

// `on_trial` hears of each simulated candidate as it finishes.
TuneResult tune(Net& net, const ComputeProfile& profile, const SimConfig& start,
                const std::function<void(const TuneTrial&)>& on_trial = {});

}  // namespace poseidon::dist
