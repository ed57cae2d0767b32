// All-reduce algorithms as steps, their time, and the sizes of fused buckets
// and spread PS blocks (see collective_costs.h).
#include "dist/plan/collective_costs.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace poseidon::dist {

namespace {

int largest_power_of_two(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

void ring(std::vector<CollectiveStep>& out, double floats, int ranks, int sharing) {
  for (int s = 0; s < 2 * (ranks - 1); ++s) out.push_back({floats / ranks, sharing, s < ranks - 1 ? floats / ranks : 0});
}

// Partners at distance 1, 2, 4, ...: a step crosses hosts once the distance
// reaches a host's ranks (`per_host`, a power of two), or always when the
// ranks of a host are not a power of two (their partners are then anywhere).
void halving_doubling(std::vector<CollectiveStep>& out, double floats, int ranks, int per_host, int sharing) {
  const int p2 = largest_power_of_two(ranks);
  const bool aligned = is_power_of_two(per_host);
  auto crossing = [&](int distance) { return !aligned || distance >= per_host ? sharing : 0; };
  if (p2 < ranks) out.push_back({floats, sharing, floats});
  std::vector<CollectiveStep> halving;
  double part = floats;
  for (int distance = 1; distance < p2; distance *= 2) {
    part /= 2;
    halving.push_back({part, crossing(distance), part});
  }
  out.insert(out.end(), halving.begin(), halving.end());
  for (auto it = halving.rbegin(); it != halving.rend(); ++it) out.push_back({it->floats, it->sharing, 0});
  if (p2 < ranks) out.push_back({floats, sharing, 0});
}

}  // namespace

std::vector<CollectiveStep> allreduce_steps(AllreduceAlgorithm algorithm, double floats, int ranks,
                                            const LinkModel& link, const CollectiveOptions& options) {
  std::vector<CollectiveStep> out;
  if (ranks < 2) return out;
  const int per_host = std::clamp(options.ranks_per_host, 1, ranks);
  const int hosts = (ranks + per_host - 1) / per_host;
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      ring(out, floats, ranks, hosts > 1 ? 1 : 0);
      break;
    case AllreduceAlgorithm::halving_doubling:
      halving_doubling(out, floats, ranks, per_host, hosts > 1 ? per_host : 0);
      break;
    case AllreduceAlgorithm::two_level: {
      POSEIDON_CHECK(ranks % per_host == 0)
          << "two_level needs whole hosts: " << ranks << " ranks, " << per_host << " per host";
      const double slice = floats / per_host;
      for (int s = 0; s < per_host - 1; ++s) out.push_back({slice, 0, slice});
      if (hosts > 1) {
        CollectiveOptions between = options;
        between.ranks_per_host = 1;
        std::vector<CollectiveStep> r, hd;
        ring(r, slice, hosts, per_host);
        halving_doubling(hd, slice, hosts, 1, per_host);
        // Either way every rank of a host is on its link in every step.
        const auto& pick = steps_seconds(r, link, between) <= steps_seconds(hd, link, between) ? r : hd;
        out.insert(out.end(), pick.begin(), pick.end());
      }
      for (int s = 0; s < per_host - 1; ++s) out.push_back({slice, 0, 0});
      break;
    }
    case AllreduceAlgorithm::automatic:
      throw Error("allreduce_steps needs a concrete algorithm");
  }
  return out;
}

double steps_seconds(const std::vector<CollectiveStep>& steps, const LinkModel& link, const CollectiveOptions& options) {
  const double link_s = 32 / (link.bandwidth_gbps * 1e9), host_s = 32 / (options.host_bandwidth_gbps * 1e9);
  double t = 0;
  for (const CollectiveStep& s : steps)
    t += s.sharing > 0 ? s.floats * s.sharing * link_s + link.latency_us * 1e-6
                       : s.floats * host_s + options.host_latency_us * 1e-6;
  return t;
}

double steps_link_busy(const std::vector<CollectiveStep>& steps, const LinkModel& link) {
  double t = 0;
  for (const CollectiveStep& s : steps) t += s.floats * s.sharing * 32 / (link.bandwidth_gbps * 1e9);
  return t;
}

double steps_floats(const std::vector<CollectiveStep>& steps) {
  double f = 0;
  for (const CollectiveStep& s : steps) f += 2 * s.floats;
  return f;
}

AllreduceAlgorithm choose_algorithm(double floats, int ranks, const LinkModel& link, const CollectiveOptions& options) {
  if (options.allreduce != AllreduceAlgorithm::automatic) return options.allreduce;
  AllreduceAlgorithm best = AllreduceAlgorithm::ring;
  double best_s = steps_seconds(allreduce_steps(best, floats, ranks, link, options), link, options);
  std::vector<AllreduceAlgorithm> others = {AllreduceAlgorithm::halving_doubling};
  if (options.ranks_per_host > 1 && ranks % options.ranks_per_host == 0)
    others.push_back(AllreduceAlgorithm::two_level);
  for (AllreduceAlgorithm a : others) {
    const double s = steps_seconds(allreduce_steps(a, floats, ranks, link, options), link, options);
    if (s < best_s) {
      best = a;
      best_s = s;
    }
  }
  return best;
}

int64_t bucket_bytes_for(int64_t fixed_bytes, int ranks, const LinkModel& link, const CollectiveOptions& options) {
  if (!options.fusion_auto || ranks < 2) return fixed_bytes;
  constexpr int64_t kMin = 1 << 20, kMax = 64 << 20;
  // Time = a * floats + latencies; a tenth in latencies: floats = 9 * latencies / a.
  const double probe = kMax / 4;
  const AllreduceAlgorithm algorithm = choose_algorithm(probe, ranks, link, options);
  const auto steps = allreduce_steps(algorithm, probe, ranks, link, options);
  const auto empty = allreduce_steps(algorithm, 0, ranks, link, options);
  const double latencies = steps_seconds(empty, link, options);
  const double per_float = (steps_seconds(steps, link, options) - latencies) / probe;
  const double bytes = per_float > 0 ? 9 * latencies / per_float * 4 : kMax;
  return std::clamp<int64_t>(static_cast<int64_t>(bytes) / 4 * 4, kMin, kMax);
}

CollectiveOptions chosen_options(const CollectiveOptions& options, int ranks) {
  CollectiveOptions o = options;
  if (!o.planner_chooses) return o;
  o.planner_chooses = false;
  if (ranks > kSmallCluster) {
    o.allreduce = AllreduceAlgorithm::automatic;
    o.fusion_auto = true;
    o.spread_blocks = true;
  }
  return o;
}

DistConfig chosen_config(const DistConfig& config, int ranks) {
  DistConfig c = config;
  c.collective = chosen_options(config.collective, ranks);
  return c;
}

int64_t block_bytes_for(int64_t fixed_bytes, int64_t ps_bytes, int ranks, const CollectiveOptions& options) {
  if (!options.spread_blocks || ranks < 2) return fixed_bytes;
  constexpr int64_t kMin = 16 << 10;
  return std::max<int64_t>(kMin, std::min<int64_t>(fixed_bytes, ps_bytes / ranks / 4 * 4));
}

}  // namespace poseidon::dist
