// The planner's view of compression: what the bf16 wire format saves the
// parameter server and all-reduce, and what low-rank compression costs, so
// that the hybrid planner (dist/plan/planner.h) can choose it per layer.
//
// Low-rank compression (dist/schemes/lowrank.h) of a layer whose weight reads as an
// n x m matrix, at rank r, on P ranks, moves per rank per iteration (in plus
// out; every rank gathers every other's factors, as SFB does)
//   2 * (P - 1) * (r * (n + m) + b)      numbers (b: the layer's other parameters)
// in two gathers of P - 1 ring steps each, and computes on every rank
//   6 * n * m * r       flops (M Q, M^T P, and P Q^T for the error memory)
//   2 * n * r * r       flops (orthogonalising P)
//   P * (r (n + m) + b) additions (the gathered factors summed in rank order)
// at the GEMM rate of the link model. bf16 halves the pushes of the
// parameter server (its pulls stay fp32) and every all-reduce step.
#pragma once

#include <cstdint>
#include <vector>

#include "core/net.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/planner.h"

namespace poseidon::dist {

SchemeCost lowrank_cost(int64_t rows, int64_t cols, int64_t others, int rank, int ranks, const LinkModel& link);

// `cost` (of ps or allreduce on fp32, for `elements` numbers) with the
// gradients on `wire`.
SchemeCost wire_cost(const SchemeCost& cost, Scheme scheme, Wire wire, const LinkModel& link);

// Revises the planner's choices for what `config` asks of compression: the
// costs of PS and all-reduce on config.wire (PS against all-reduce chosen
// again, SFB kept where it is still not slower), then, with config.lowrank,
// low-rank compression wherever it is strictly faster than the choice.
void plan_compression(std::vector<LayerPlan>& layers, Net& net, int ranks, const LinkModel& link,
                      const DistConfig& config);

}  // namespace poseidon::dist
