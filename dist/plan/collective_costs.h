// The cost model of the all-reduce algorithms, step by step, shared by the
// planner (which picks an algorithm and a bucket size from it) and the
// simulator (which charges each step). A step is one exchange every rank
// takes part in at once: a number of floats each way per rank, through the
// host's link (shared by the ranks of a host that cross it in that step) or
// inside the host, and the floats summed after it.
//
// On P ranks of G per host (consecutive ranks share a host), for n floats:
//  - ring: 2 (P - 1) steps of n / P; the first P - 1 followed by a sum. With
//    the ring ordered by host, one rank per host crosses the link per step.
//  - halving-doubling: with P' the largest power of two <= P, the P - P'
//    extra ranks first hand their n floats to a partner (a step of n, summed),
//    then log2 P' halving steps of n/2, n/4, ..., n/P' (each summed; partners
//    at distance 1, 2, 4, ..., so that the large steps stay inside a host),
//    log2 P' doubling steps back, and the extras get the result (a step of n).
//    A step whose partners sit on other hosts has every rank of the host on
//    the link at once.
//  - two-level: a ring reduce-scatter inside each host (G - 1 steps of n / G,
//    summed), then the G slices are all-reduced between the P / G hosts (G
//    all-reduces of n / G at once through the host's link, each ring or
//    halving-doubling, whichever is cheaper), then a ring all-gather inside
//    the host.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/plan/dist_config.h"
#include "dist/plan/planner.h"

namespace poseidon::dist {

struct CollectiveStep {
  double floats = 0;        // each way, per rank
  int sharing = 1;          // ranks of one host on its link at once; 0: inside the host
  double summed = 0;        // floats summed after the step
};

// The steps of `algorithm` (not automatic) for `floats` on `ranks` ranks.
std::vector<CollectiveStep> allreduce_steps(AllreduceAlgorithm algorithm, double floats, int ranks,
                                            const LinkModel& link, const CollectiveOptions& options);

// Seconds the steps hold the links (transfers and latencies, no sums).
double steps_seconds(const std::vector<CollectiveStep>& steps, const LinkModel& link, const CollectiveOptions& options);
// Seconds the host's link is busy sending (as receiving) during them.
double steps_link_busy(const std::vector<CollectiveStep>& steps, const LinkModel& link);
// Floats each rank sends plus receives.
double steps_floats(const std::vector<CollectiveStep>& steps);

// `options.allreduce`, or for automatic the algorithm whose steps take the
// least time for `floats` (ring on ties, then halving-doubling).
AllreduceAlgorithm choose_algorithm(double floats, int ranks, const LinkModel& link, const CollectiveOptions& options);

// With options.fusion_auto, the bucket size at which the latencies are a
// tenth of a bucket's time on `ranks` ranks (between 1 and 64 MiB, a whole
// number of floats); else `fixed_bytes`.
int64_t bucket_bytes_for(int64_t fixed_bytes, int ranks, const LinkModel& link, const CollectiveOptions& options);

// The options a run uses on `ranks` ranks. Unless options.planner_chooses,
// `options` as they are. Else (no dist.allreduce, dist.fusion or
// dist.spread_blocks in the config): up to kSmallCluster ranks the
// small-cluster defaults (ring, fixed buckets, fixed blocks), which the
// simulator puts level with or ahead of the large-cluster options there
// (docs/SCALING.md: 32.48 against 32.40 at P = 32, VGG19-22K, 40 Gbit/s);
// above, the large-cluster options (allreduce auto, fusion auto,
// spread_blocks), whose algorithm per bucket and bucket size then follow from
// the link model (and ranks_per_host) as for those keys set by hand.
constexpr int kSmallCluster = 32;
CollectiveOptions chosen_options(const CollectiveOptions& options, int ranks);
// `config` with its collective options chosen for `ranks` (chosen_options).
DistConfig chosen_config(const DistConfig& config, int ranks);

// With options.spread_blocks, PS blocks small enough that `ps_bytes` make at
// least one block per rank (no smaller than 16 KiB); else `fixed_bytes`.
int64_t block_bytes_for(int64_t fixed_bytes, int64_t ps_bytes, int ranks, const CollectiveOptions& options);

}  // namespace poseidon::dist
