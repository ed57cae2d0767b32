// HybComm cost model, the per-layer choice, and the GEMM probe (the link
// probe, which needs the network, is dist/runtime/link_probe.h).
#include "dist/plan/planner.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/math.h"
#include "dist/plan/collective_costs.h"
#include "dist/plan/median_seconds.h"
#include "dist/plan/plan.h"

namespace poseidon::dist {

namespace {
double transfer_seconds(double numbers, const LinkModel& link) {
  return numbers / 2 * 4 / (link.bandwidth_gbps * 1e9 / 8);
}
}  // namespace

SchemeCost ps_cost(int64_t elements, int ranks, const LinkModel& link) {
  SchemeCost c;
  if (ranks < 2) return c;
  c.numbers = 4.0 * static_cast<double>(elements) * (ranks - 1) / ranks;
  c.seconds = transfer_seconds(c.numbers, link) + 2 * link.latency_us * 1e-6;
  return c;
}

SchemeCost allreduce_cost(int64_t elements, int ranks, const LinkModel& link) {
  SchemeCost c;
  if (ranks < 2) return c;
  c.numbers = 4.0 * static_cast<double>(elements) * (ranks - 1) / ranks;
  c.seconds = transfer_seconds(c.numbers, link) + 2.0 * (ranks - 1) * link.latency_us * 1e-6;
  return c;
}

double host_link_factor(int ranks, const LinkModel& link, const CollectiveOptions& options) {
  const int per_host = std::clamp(options.ranks_per_host, 1, std::max(ranks, 1));
  if (per_host == 1 || ranks < 2) return 1;
  const double away = static_cast<double>(ranks - per_host) / (ranks - 1);
  return per_host * away + (1 - away) * link.bandwidth_gbps / options.host_bandwidth_gbps;
}

SchemeCost ps_cost(int64_t elements, int ranks, const LinkModel& link, int servers, int64_t block_elements,
                   Wire wire, const CollectiveOptions& options) {
  SchemeCost c = ps_cost(elements, ranks, link);
  if (ranks < 2) return c;
  const double hosts = host_link_factor(ranks, link, options);
  // Half the numbers are pushes, on the wire format; half are pulls, fp32.
  const double share = (static_cast<double>(wire_bytes(wire)) / 4 + 1) / 2;
  c.numbers *= share;
  const double spread = static_cast<double>(ranks) / std::clamp(servers, 1, ranks);
  // A block's values go back only once its owner has all P - 1 pushes
  // (block_elements 0: not counted).
  const double block = static_cast<double>(std::min(elements, block_elements));
  const double incast = transfer_seconds(2 * block * (ranks - 1) * share, link);
  c.seconds = std::max(transfer_seconds(c.numbers, link) * spread * hosts, incast) + 2 * link.latency_us * 1e-6;
  return c;
}

SchemeCost allreduce_cost(int64_t elements, int ranks, const LinkModel& link, const CollectiveOptions& options,
                          int64_t bucket_bytes, Wire wire) {
  SchemeCost c;
  if (ranks < 2 || elements == 0) return c;
  const double bucket = options.fusion_auto ? std::max(static_cast<double>(elements), bucket_bytes / 4.0)
                                            : static_cast<double>(elements);
  // The steps of the bytes that travel, counted in fp32 numbers.
  const double travelling = bucket * static_cast<double>(wire_bytes(wire)) / 4;
  const auto steps =
      allreduce_steps(choose_algorithm(travelling, ranks, link, options), travelling, ranks, link, options);
  const double share = static_cast<double>(elements) / bucket;
  c.numbers = steps_floats(steps) * share;
  c.seconds = steps_seconds(steps, link, options) * share;
  return c;
}

SchemeCost sfb_cost(int64_t outputs, int64_t inputs, int64_t batch, int ranks, const LinkModel& link) {
  SchemeCost c;
  if (ranks < 2) return c;
  c.numbers = 2.0 * static_cast<double>(batch) * (ranks - 1) * static_cast<double>(outputs + inputs);
  const double rebuild_flops = 2.0 * outputs * inputs * static_cast<double>(ranks) * batch;
  c.seconds = transfer_seconds(c.numbers, link) + (ranks - 1) * link.latency_us * 1e-6 +
              rebuild_flops / (link.gemm_gflops * 1e9);
  return c;
}

std::vector<LayerPlan> plan_layers(Net& net, int64_t batch, int ranks, const LinkModel& link,
                                   const DistConfig& configured) {
  const DistConfig config = chosen_config(configured, ranks);
  const bool weigh_wires = config.compression == Compression::automatic;
  const Wire first_wire = weigh_wires || config.compression == Compression::lossless ? Wire::fp32 : config.wire;
  // How many ranks the PS blocks would keep serving, were every layer on PS.
  int64_t ps_bytes = 0;
  for (const PlannedParam& p : backward_order(net)) ps_bytes += p.param->value.numel() * 4;
  const int64_t block = block_bytes_for(config.block_bytes, ps_bytes, ranks, config.collective);
  int64_t blocks = 0;
  for (const PlannedParam& p : backward_order(net)) blocks += (p.param->value.numel() * 4 + block - 1) / block;
  // With the defaults the planner keeps its earlier model (every rank a server).
  const bool at_scale = config.collective.spread_blocks;
  const int servers = at_scale ? static_cast<int>(std::min<int64_t>(ranks, std::max<int64_t>(blocks, 1))) : ranks;
  const int64_t bucket = bucket_bytes_for(config.bucket_bytes, ranks, link, config.collective);
  std::vector<LayerPlan> out;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    LayerPlan lp;
    lp.layer = i;
    int64_t elements = 0;
    for (const Param& p : net.layer(i).params())
      if (p.learnable) {
        lp.shapes.push_back(p.shape);
        elements += shape_numel(p.shape);
      }
    if (lp.shapes.empty()) continue;
    lp.ps = ps_cost(elements, ranks, link, servers, at_scale ? block / 4 : 0, first_wire, config.collective);
    lp.scheme = Scheme::ps;
    lp.cost = lp.ps;
    lp.wire = first_wire;
    for (Wire wire : weigh_wires ? std::vector<Wire>{Wire::fp32, Wire::bf16} : std::vector<Wire>{first_wire}) {
      // bf16 replaces an fp32 choice only when more than 1% faster.
      const double margin = wire != first_wire ? 0.99 : 1.0;
      if (wire != first_wire) {
        const SchemeCost ps = ps_cost(elements, ranks, link, servers, at_scale ? block / 4 : 0, wire, config.collective);
        if (ps.seconds < lp.cost.seconds * margin) {
          lp.scheme = Scheme::ps;
          lp.cost = ps;
          lp.wire = wire;
        }
      }
      const SchemeCost ar = allreduce_cost(elements, ranks, link, config.collective, bucket, wire);
      // All-reduce only when faster beyond rounding: its step-by-step sum and
      // PS's closed form tie exactly where they move the same bytes (no
      // latency), and a tie keeps PS, as the plans of earlier runs did.
      if (ar.seconds < lp.cost.seconds * (lp.wire == wire ? 1 - 1e-9 : margin)) {
        lp.scheme = Scheme::allreduce;
        lp.cost = ar;
        lp.wire = wire;
      }
    }
    lp.sfb_possible = sfb_applicable(net, i);
    if (lp.sfb_possible) {
      const Shape& w = lp.shapes[0];
      const SchemeCost sfb = sfb_cost(w[0], w[1], batch, ranks, link);
      if (sfb.seconds <= lp.cost.seconds) {
        lp.scheme = Scheme::sfb;
        lp.cost = sfb;
        lp.wire = Wire::fp32;
      }
    }
    out.push_back(std::move(lp));
  }
  return out;
}

double measure_gemm_gflops() {
  const int64_t n = 384;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  gemm(false, false, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data());  // warm-up
  const double seconds =
      median_seconds(8, [&] { gemm(false, false, n, n, n, 1.f, a.data(), b.data(), 0.f, c.data()); });
  return 2.0 * n * n * n / std::max(seconds, 1e-9) / 1e9;
}

}  // namespace poseidon::dist
