// The plan verb: what HybComm picks for each layer of a model at P ranks,
// the numbers each rank moves per iteration and the estimated time, with the
// totals against synchronising everything through the parameter server.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/net.h"
#include "core/units.h"
#include "dist/plan/collective_costs.h"
#include "dist/plan/compression_plan.h"
#include "dist/plan/plan_file.h"
#include "dist/plan/planner.h"
#include "tools/cli/commands.h"
#include "tools/cli/train_config.h"

namespace poseidon {

namespace {
std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string out;
  for (const Shape& s : shapes) {
    if (!out.empty()) out += ' ';
    out += shape_str(s);
  }
  return out;
}

nlohmann::json cost_json(const dist::SchemeCost& c) {
  return {{"numbers", c.numbers}, {"bytes", c.bytes()}, {"seconds", c.seconds}};
}

// "allreduce", "ps bf16", "lowrank r8": the scheme and what compresses it.
std::string choice_text(const dist::LayerPlan& lp) {
  std::string out = dist::scheme_name(lp.scheme);
  if (lp.scheme == dist::Scheme::lowrank) out += " r" + std::to_string(lp.rank);
  if ((lp.scheme == dist::Scheme::ps || lp.scheme == dist::Scheme::allreduce) && lp.wire == dist::Wire::bf16)
    out += " bf16";
  return out;
}

// "ring, 4 MiB buckets, 4 MiB blocks" or "auto, fused buckets of 12 MiB, spread blocks of 64 KiB".
std::string collective_text(const dist::DistConfig& config, int ranks, const dist::LinkModel& link) {
  const dist::CollectiveOptions o = dist::chosen_options(config.collective, ranks);
  const int64_t bucket = dist::bucket_bytes_for(config.bucket_bytes, ranks, link, o);
  std::string out = "all-reduce " + dist::algorithm_name(o.allreduce) + (o.fusion_auto ? ", fused buckets of " : ", buckets of ") +
                    human_bytes(static_cast<double>(bucket));
  if (o.spread_blocks) out += ", spread PS blocks";
  else out += ", PS blocks of " + human_bytes(static_cast<double>(config.block_bytes));
  return out + (config.collective.planner_chooses ? " (chosen for " + std::to_string(ranks) + " ranks)" : "");
}
}  // namespace

int cmd_plan(const PlanArgs& args) {
  if (args.tune) return cmd_plan_tune(args);
  auto [model, batch, dist_config] = load_dist_model(args.file, args.overrides, args.batch);
  dist::LinkModel link;
  link.bandwidth_gbps = args.bandwidth_gbps > 0 ? args.bandwidth_gbps : dist_config.bandwidth_gbps.value_or(10);
  link.latency_us = args.latency_us >= 0 ? args.latency_us : dist_config.latency_us.value_or(20);
  const bool gemm_measured = args.gemm_gflops <= 0 && !dist_config.gemm_gflops;
  link.gemm_gflops = args.gemm_gflops > 0   ? args.gemm_gflops
                     : gemm_measured        ? dist::measure_gemm_gflops()
                                            : *dist_config.gemm_gflops;

  Net net(model, 1);  // shapes only: the per-rank batch enters the cost model, not the blobs
  std::vector<dist::LayerPlan> layers = dist::plan_layers(net, batch, args.workers, link, dist_config);
  dist::plan_compression(layers, net, args.workers, link, dist_config);
  dist::SchemeCost hybrid, all_ps;
  for (const auto& lp : layers) {
    hybrid.numbers += lp.cost.numbers;
    hybrid.seconds += lp.cost.seconds;
    all_ps.numbers += lp.ps.numbers;
    all_ps.seconds += lp.ps.seconds;
  }
  if (!args.out.empty())
    dist::write_plan_file(args.out, dist::plan_record(layers, net, args.workers, batch, link));

  if (args.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& lp : layers) {
      const Layer& l = net.layer(lp.layer);
      rows.push_back({{"name", l.name()},
                      {"type", l.type()},
                      {"shapes", lp.shapes},
                      {"scheme", dist::scheme_name(lp.scheme)},
                      {"wire", dist::wire_name(lp.wire)},
                      {"rank", lp.rank},
                      {"cost", cost_json(lp.cost)},
                      {"ps", cost_json(lp.ps)}});
    }
    nlohmann::json out = {{"model", net.name()},
                          {"workers", args.workers},
                          {"batch", batch},
                          {"bandwidth_gbps", link.bandwidth_gbps},
                          {"latency_us", link.latency_us},
                          {"gemm_gflops", link.gemm_gflops},
                          {"gemm_measured", gemm_measured},
                          {"compression", dist::compression_name(dist_config.compression)},
                          {"collective", collective_text(dist_config, args.workers, link)},
                          {"layers", rows},
                          {"total", {{"hybrid", cost_json(hybrid)}, {"all_ps", cost_json(all_ps)}}}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %d workers, batch %lld per worker; link %.3g Gbit/s, %.3g us; SFB rebuild at %.3g GFLOP/s%s\n",
              net.name().c_str(), args.workers, static_cast<long long>(batch), link.bandwidth_gbps, link.latency_us,
              link.gemm_gflops, gemm_measured ? " (measured here)" : "");
  std::printf("compression %s; %s\n", dist::compression_name(dist_config.compression).c_str(),
              collective_text(dist_config, args.workers, link).c_str());
  std::printf("%-20s %-28s %-14s %16s %12s\n", "layer", "shape", "scheme", "MB/iter/rank", "est. ms");
  for (const auto& lp : layers)
    std::printf("%-20s %-28s %-14s %16.3f %12.3f\n", net.layer(lp.layer).name().c_str(), shapes_text(lp.shapes).c_str(),
                choice_text(lp).c_str(), lp.cost.bytes() / 1e6, lp.cost.seconds * 1e3);
  std::printf("total hybrid: %.3f MB per rank per iteration, %.3f ms (layers one after another)\n",
              hybrid.bytes() / 1e6, hybrid.seconds * 1e3);
  std::printf("total all-PS: %.3f MB per rank per iteration, %.3f ms; hybrid moves %.1f%% of it\n",
              all_ps.bytes() / 1e6, all_ps.seconds * 1e3,
              all_ps.numbers > 0 ? 100.0 * hybrid.numbers / all_ps.numbers : 100.0);
  return 0;
}

}  // namespace poseidon
