// The coordinate search of `poseidon plan --tune` (see tune.h).
#include "dist/sim/tune.h"

#include "dist/plan/collective_costs.h"

namespace poseidon::dist {

namespace {

struct Candidate {
  std::string change;
  std::function<void(DistConfig&)> apply;
};

std::string mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::vector<std::vector<Candidate>> dimensions(const SimConfig& start) {
  std::vector<Candidate> schemes, algorithms, buckets, blocks, orders;
  for (SchemeChoice s : {SchemeChoice::hybrid, SchemeChoice::allreduce, SchemeChoice::ps})
    schemes.push_back({"scheme " + choice_name(s), [s](DistConfig& c) { c.scheme = s; }});
  std::vector<AllreduceAlgorithm> as = {AllreduceAlgorithm::ring, AllreduceAlgorithm::halving_doubling,
                                        AllreduceAlgorithm::automatic};
  const int per_host = start.dist.collective.ranks_per_host;
  if (per_host > 1 && start.workers % per_host == 0) as.push_back(AllreduceAlgorithm::two_level);
  for (AllreduceAlgorithm a : as)
    algorithms.push_back({"allreduce " + algorithm_name(a), [a](DistConfig& c) { c.collective.allreduce = a; }});
  buckets.push_back({"fusion auto", [](DistConfig& c) { c.collective.fusion_auto = true; }});
  for (int64_t mb : {1, 4, 16, 64})
    buckets.push_back({"bucket " + mib(mb << 20), [mb](DistConfig& c) {
                         c.collective.fusion_auto = false;
                         c.bucket_bytes = mb << 20;
                       }});
  blocks.push_back({"spread blocks", [](DistConfig& c) { c.collective.spread_blocks = true; }});
  for (int64_t mb : {1, 4, 16})
    blocks.push_back({"block " + mib(mb << 20), [mb](DistConfig& c) {
                        c.collective.spread_blocks = false;
                        c.block_bytes = mb << 20;
                      }});
  for (SendOrder o : {SendOrder::backward, SendOrder::priority})
    orders.push_back({"order " + order_name(o), [o](DistConfig& c) { c.order = o; }});
  return {schemes, algorithms, buckets, blocks, orders};
}

}  // namespace

TuneResult tune(Net& net, const ComputeProfile& profile, const SimConfig& start,
                const std::function<void(const TuneTrial&)>& on_trial) {
  TuneResult best;
  // From the options the run would use (chosen_options: those the planner
  // picks for the rank count when the config sets none), each then searched.
  best.config = chosen_config(start.dist, start.workers);
  SimConfig trial = start;
  trial.dist = best.config;
  best.result = simulate(net, profile, trial);
  best.trials.push_back({"as configured", best.result});
  if (on_trial) on_trial(best.trials.back());
  constexpr int kPasses = 2;
  for (int pass = 0; pass < kPasses; ++pass)
    for (const std::vector<Candidate>& dimension : dimensions(start))
      for (const Candidate& candidate : dimension) {
        trial.dist = best.config;
        candidate.apply(trial.dist);
        SimResult r = simulate(net, profile, trial);
        best.trials.push_back({candidate.change, r});
        if (on_trial) on_trial(best.trials.back());
        if (r.iteration_s < best.result.iteration_s) {
          best.config = trial.dist;
          best.result = std::move(r);
        }
      }
  return best;
}

}  // namespace poseidon::dist
