// The planner's view of low-rank compression: what it costs, so that the
// hybrid planner (dist/plan/planner.h, which charges the bf16 wire format
// itself) can choose it per layer.
//
// Low-rank compression (dist/schemes/lowrank.h) of a layer whose weight
// reads as an n x m matrix, at rank r, on P ranks, moves per rank per
// iteration (in plus out; two ring all-reduces, of P and the other
// parameters, then of Q)
//   4 * (P - 1) / P * (r * (n + m) + b)      numbers (b: the layer's other parameters)
// in 4 (P - 1) ring steps, and computes on every rank
//   6 * n * m * r       flops (M Q, M^T P, and P Q^T for the error memory)
//   2 * n * r * r       flops (orthogonalising P)
//   r (n + m) + b       additions (the reduce-scatters' sums, about)
// at the GEMM rate of the link model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/net.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/planner.h"

namespace poseidon::dist {

SchemeCost lowrank_cost(int64_t rows, int64_t cols, int64_t others, int rank, int ranks, const LinkModel& link);

// Revises the planner's choices (whose PS and all-reduce costs already count
// config.wire: dist/plan/planner.h) for low-rank compression, with
// config.lowrank, wherever it is strictly faster than the choice.
void plan_compression(std::vector<LayerPlan>& layers, Net& net, int ranks, const LinkModel& link,
                      const DistConfig& config);

}  // namespace poseidon::dist
