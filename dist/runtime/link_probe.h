// The link probe: the bandwidth and latency the planner's cost model takes,
// measured between two ranks over MPI before the first plan. It lives with
// the runtime because it needs the network; the planner itself (dist/plan/)
// only reads the figures.
#pragma once

#include <optional>

#include "dist/plan/dist_config.h"
#include "dist/plan/planner.h"
#include "dist/runtime/comm.h"

namespace poseidon::dist {

// Fills what `config` leaves unset: bandwidth and latency by a ping-pong
// between ranks 0 and 1 (median round trips), the GEMM rate (unless
// `gemm_gflops` gives it) by timing GEMMs on rank 0 (the median); rank 0's
// figures are broadcast, so that every rank plans the same. The ranks start
// together and the others wait asleep, so that on hosts with more ranks than
// cores the probe times the link, not the scheduler. With `recorded` on rank
// 0 (figures an earlier start measured: dist/plan/plan_file.h) nothing is probed
// and every rank takes those. Collective; call it before the scheduler exists.
LinkModel measure_link(const World& world, const DistConfig& config, std::optional<double> gemm_gflops = std::nullopt,
                       const std::optional<LinkModel>& recorded = std::nullopt);

}  // namespace poseidon::dist
