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
// SFB when that is not slower than the better of the two. dist.wire bf16
// enters those costs (the PS and all-reduce bytes that shrink), so that the
// choice is made on what the plan will move.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/net.h"
#include "dist/plan/dist_config.h"

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
// At scale: PS whose blocks have only `servers` owners (fewer than the ranks
// when the blocks are fewer), each owner's link taking the P - 1 pushes of
// its blocks: the layer's share of the busiest owner's load, P / servers
// times the even spread's, and no less than one block of `block_elements`
// pushed P - 1 times to its owner and sent back P - 1 times (its values go
// back only after the last push). The planner counts that incast with
// dist.spread_blocks only: fixed blocks are few per layer at small P and
// their owners' incasts overlap other layers' transfers (the simulator puts
// PS level with all-reduce there), while spread blocks give each owner about
// one block of a layer, which then waits on it. plan_layers counts fewer
// servers than ranks with dist.spread_blocks too, so that the defaults plan
// as before. All-reduce of a layer fused into a bucket of
// `bucket_bytes` (the layer alone when it is larger) by the algorithm
// dist/plan/collective_costs.h picks for that bucket: the layer's share of the bucket's
// steps, latencies included. That share needs dist.fusion auto, whose
// buckets fill up to their size; with fixed buckets a layer pays a whole
// bucket's latencies, as a lone layer does.
// With the gradients on a bf16 `wire`, PS pushes (and the incast) take half
// their bytes and its pulls stay fp32; every all-reduce step moves half its
// bytes and keeps its latency, and the algorithm is the one that is fastest
// for the bytes that travel.
// With `options.ranks_per_host` G above 1, PS transfers are charged as they
// run on hosts of G ranks sharing one link (host_link_factor). SFB's ring
// all-gather, ordered by host, has one rank of a host on its link per step,
// as a ring all-reduce (dist/plan/collective_costs.h): no sharing.
SchemeCost ps_cost(int64_t elements, int ranks, const LinkModel& link, int servers, int64_t block_elements,
                   Wire wire = Wire::fp32, const CollectiveOptions& options = {});
SchemeCost allreduce_cost(int64_t elements, int ranks, const LinkModel& link, const CollectiveOptions& options,
                          int64_t bucket_bytes, Wire wire = Wire::fp32);
SchemeCost sfb_cost(int64_t outputs, int64_t inputs, int64_t batch, int ranks, const LinkModel& link);

// How much longer a rank's point-to-point traffic (spread evenly over the
// other ranks) takes on hosts of G = options.ranks_per_host ranks than on a
// link of its own: the (P - G) / (P - 1) of it bound for other hosts crosses
// the host's one link together with the other G - 1 ranks' (G times as
// long), the rest moves inside the host at host_bandwidth_gbps. 1 for G = 1.
double host_link_factor(int ranks, const LinkModel& link, const CollectiveOptions& options);

// The planner's choice for one layer with learnable parameters.
struct LayerPlan {
  size_t layer = 0;  // index in the Net
  std::vector<Shape> shapes;
  Scheme scheme = Scheme::ps;
  SchemeCost cost;  // of the chosen scheme
  SchemeCost ps;    // of PS, for the comparison with all-PS
  bool sfb_possible = false;
  Wire wire = Wire::fp32;  // of its gradients (ps, allreduce)
  int rank = 0;            // lowrank: the rank of its factors
};

// One entry per layer with learnable parameters, in layer order, for `ranks`
// ranks training `batch` examples each, with the block, bucket and
// collective options of `config` as chosen_options gives them for `ranks`
// (its scheme is not read). With dist.compression auto each layer's PS and
// all-reduce are weighed in fp32 and in bf16, bf16 taken only when it is
// more than 1% faster (the exact format on near ties); else in config.wire.
std::vector<LayerPlan> plan_layers(Net& net, int64_t batch, int ranks, const LinkModel& link,
                                   const DistConfig& config = {});

// The GEMM rate of this process, GFLOP/s, from a short timed GEMM.
double measure_gemm_gflops();

}  // namespace poseidon::dist
