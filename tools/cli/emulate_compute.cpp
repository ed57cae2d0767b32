// Loads a compute profile onto a Net as per-layer waits (see emulate_compute.h).
#include "tools/cli/emulate_compute.h"

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "dist/simulate_profile.h"

namespace poseidon {

double emulate_compute(Net& net, const std::string& profile_path, double scale, int64_t batch) {
  if (!(scale > 0) || !std::isfinite(scale))
    throw Error("--emulate-scale must be a positive number, not " + std::to_string(scale));
  dist::ComputeProfile profile = dist::load_profile(profile_path, net);
  // The times are for the profile's batch: at another batch they would be wrong without saying so.
  if (profile.batch != batch)
    throw Error("--emulate-compute " + profile_path + " holds times for batch " + std::to_string(profile.batch) +
                ", but data.train.batch_size is " + std::to_string(batch));
  for (double& t : profile.forward_s) t *= scale;
  for (double& t : profile.backward_s) t *= scale;
  const double total = std::accumulate(profile.forward_s.begin(), profile.forward_s.end(), 0.0) +
                       std::accumulate(profile.backward_s.begin(), profile.backward_s.end(), 0.0);
  net.emulate_compute(std::move(profile.forward_s), std::move(profile.backward_s));
  return total;
}

}  // namespace poseidon
