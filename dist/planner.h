// Planner (HybComm): for each layer, the scheme that synchronises it fastest,
// from the cost model of docs/REFERENCE.md. Numbers moved per rank per iteration (in
// plus out, co-located servers: P workers that are also the P servers), for a
// layer of S parameters, or an FC layer of M outputs and N inputs at K
// examples per rank:
//   PS         4 * S * (P - 1) / P        (= 2 S (P1 + P2 - 2) / P2)
//   all-reduce 4 * S * (P - 1) / P        (ring: reduce-scatter + all-gather)
//   SFB        2 * K * (P - 1) * (M + N)  (FC only; the bias comes free)
// Estimated time: half of those numbers each way over a full-duplex link of
// the given bandwidth, plus the latency of each scheme's message rounds (PS:
// push and pull; all-reduce and SFB: one per ring step), plus for SFB the
// 2 * M * N * P * K flops that rebuild the gradient at the given GEMM rate.
// Non-FC layers use PS unless all-reduce is strictly faster; an FC layer uses
// SFB when that is not slower than PS.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/net.h"
#include "dist/comm.h"
#include "dist/dist_config.h"

namespace poseidon::dist {

struct LinkModel {
  double bandwidth_gbps = 10;  // Gbit/s each way
  double latency_us = 20;      // per message round
  double gemm_gflops = 50;     // rate of the SFB rebuild GEMM
};

struct SchemeCost {
  double numbers = 0;  // moved per rank per iteration, in plus out
  double seconds = 0;  // estimated
  double bytes() const { return numbers * 4; }
};

SchemeCost ps_cost(int64_t elements, int ranks, const LinkModel& link);
SchemeCost allreduce_cost(int64_t elements, int ranks, const LinkModel& link);
SchemeCost sfb_cost(int64_t outputs, int64_t inputs, int64_t batch, int ranks, const LinkModel& link);

// The planner's choice for one layer with learnable parameters.
struct LayerPlan {
  size_t layer = 0;  // index in the Net
  std::vector<Shape> shapes;
  Scheme scheme = Scheme::ps;
  SchemeCost cost;  // of the chosen scheme
  SchemeCost ps;    // of PS, for the comparison with all-PS
  bool sfb_possible = false;
};

// One entry per layer with learnable parameters, in layer order, for `ranks`
// ranks training `batch` examples each.
std::vector<LayerPlan> plan_layers(Net& net, int64_t batch, int ranks, const LinkModel& link);

// Fills what `config` leaves unset: bandwidth and latency by a ping-pong
// between ranks 0 and 1 (median round trips), the GEMM rate (unless
// `gemm_gflops` gives it) by timing GEMMs on rank 0 (the median); rank 0's
// figures are broadcast, so that every rank plans the same. The ranks start
// together and the others wait asleep, so that on hosts with more ranks than
// cores the probe times the link, not the scheduler. With `recorded` on rank
// 0 (figures an earlier start measured: dist/plan_file.h) nothing is probed
// and every rank takes those. Collective; call it before the scheduler exists.
LinkModel measure_link(const World& world, const DistConfig& config, std::optional<double> gemm_gflops = std::nullopt,
                       const std::optional<LinkModel>& recorded = std::nullopt);

// The GEMM rate of this process, GFLOP/s, from a short timed GEMM.
double measure_gemm_gflops();

}  // namespace poseidon::dist
