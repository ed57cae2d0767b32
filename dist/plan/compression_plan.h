// The planner's view of low-rank compression: what it costs, so that the
// hybrid planner (dist/plan/planner.h, which charges the bf16 wire format
// itself) can choose it per layer.
//
// Low-rank compression (dist/schemes/lowrank.h) of a layer whose weight
// reads as an n x m matrix, at rank r, on P ranks, moves per rank per
// iteration (in plus out) two all-reduces, of P and the other parameters
// (r n + b numbers, b: the layer's other parameters), then of Q (r m), each
// by the algorithm of lowrank_algorithm (a ring unless dist.allreduce, or
// the planner's choice at scale, says otherwise: dist/plan/collective_costs.h,
// whose steps give the bytes and latencies; a ring's are
//   4 * (P - 1) / P * (r * (n + m) + b)      numbers in 4 (P - 1) steps),
// and computes on every rank
//   6 * n * m * r       flops (M Q, M^T P, and P Q^T for the error memory)
//   2 * n * r * r       flops (orthogonalising P)
//   r (n + m) + b       additions (the reduce-scatters' sums, about)
// at the GEMM rate of the link model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/net.h"
#include "dist/plan/collective_costs.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/planner.h"

namespace poseidon::dist {

// The algorithm of both all-reduces of a low-rank layer: options.allreduce,
// or for automatic the fastest for the larger of the two sums.
AllreduceAlgorithm lowrank_algorithm(int64_t rows, int64_t cols, int64_t others, int rank, int ranks,
                                     const LinkModel& link, const CollectiveOptions& options);

// The two all-reduces' steps by `algorithm` (dist/plan/collective_costs.h), one after the other.
std::vector<CollectiveStep> lowrank_steps(AllreduceAlgorithm algorithm, int64_t rows, int64_t cols, int64_t others,
                                          int rank, int ranks, const LinkModel& link, const CollectiveOptions& options);

SchemeCost lowrank_cost(int64_t rows, int64_t cols, int64_t others, int rank, int ranks, const LinkModel& link,
                        const CollectiveOptions& options = {});

// The ranks dist.compression auto weighs for a layer: the budget's lowest
// rank times 1, 2, 4 and 8.
std::vector<int> lowrank_candidates(int min_rank);

// Revises the planner's choices (whose PS and all-reduce costs already count
// the wire: dist/plan/planner.h) for low-rank compression:
//  - with config.lowrank (dist.compression off), at config.lowrank_rank
//    wherever it is strictly faster than the choice;
//  - with dist.compression auto, at the rank among lowrank_candidates that
//    costs least (the highest rank within 2% of that cost: more accuracy for
//    next to nothing), wherever that is more than 1% faster than the choice
//    (a lossless one is kept on near ties).
void plan_compression(std::vector<LayerPlan>& layers, Net& net, int ranks, const LinkModel& link,
                      const DistConfig& config);

}  // namespace poseidon::dist
