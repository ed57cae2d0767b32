// `poseidon plan --tune`: the distributed options the simulator finds
// fastest for a model on P ranks (dist/sim/tune.h), each candidate printed as it
// is simulated, and with --out a plan file that pins the chosen per-layer
// schemes and options in training (dist.plan_file).
#include <cstdio>

#include "core/error.h"
#include "core/net.h"
#include "dist/plan/plan_file.h"
#include "dist/sim/tune.h"
#include "tools/cli/commands.h"
#include "tools/cli/train_config.h"

namespace poseidon {

namespace {
std::string options_text(const dist::DistConfig& c) {
  const dist::CollectiveOptions& o = c.collective;
  return "scheme " + dist::choice_name(c.scheme) + ", allreduce " + dist::algorithm_name(o.allreduce) + ", " +
         (o.fusion_auto ? std::string("fusion auto") : "bucket " + std::to_string(c.bucket_bytes) + " bytes") + ", " +
         (o.spread_blocks ? std::string("spread blocks") : "block " + std::to_string(c.block_bytes) + " bytes") +
         ", order " + dist::order_name(c.order) + ", compression " + dist::compression_name(c.compression);
}
}  // namespace

int cmd_plan_tune(const PlanArgs& args) {
  if (args.profile.empty()) throw Error("plan --tune needs --profile (per-layer times: poseidon time --json)");
  auto [model, batch, dist_config] = load_dist_model(args.file, args.overrides, args.batch);
  Net net(model, 1);  // shapes only: the per-rank batch enters through the profile
  const dist::ComputeProfile profile = dist::load_profile(args.profile, net);
  if (args.batch > 0 && args.batch != profile.batch)
    throw Error("profile " + args.profile + " is for batch " + std::to_string(profile.batch) + ", not --batch " +
                std::to_string(args.batch));
  dist::SimConfig start;
  start.workers = args.workers;
  start.iterations = args.iterations;
  start.dist = dist_config;
  start.link.bandwidth_gbps = args.bandwidth_gbps > 0 ? args.bandwidth_gbps : dist_config.bandwidth_gbps.value_or(10);
  start.link.latency_us = args.latency_us >= 0 ? args.latency_us : dist_config.latency_us.value_or(20);
  start.link.gemm_gflops = args.gemm_gflops > 0   ? args.gemm_gflops
                           : profile.gemm_gflops ? *profile.gemm_gflops
                                                 : dist::measure_gemm_gflops();
  std::printf("%s: %d workers, batch %lld per worker; link %.3g Gbit/s, %.3g us; profile %s\n", net.name().c_str(),
              args.workers, static_cast<long long>(profile.batch), start.link.bandwidth_gbps, start.link.latency_us,
              profile.source.c_str());
  std::printf("%-24s %12s %11s\n", "candidate", "iter ms", "efficiency");
  const dist::TuneResult best = dist::tune(net, profile, start, [](const dist::TuneTrial& t) {
    std::printf("%-24s %12.3f %10.1f%%\n", t.change.c_str(), t.result.iteration_s * 1e3,
                100 * t.result.efficiency());
    std::fflush(stdout);
  });
  std::printf("fastest: %s: %.3f ms per iteration, %.1f%% efficiency\n", options_text(best.config).c_str(),
              best.result.iteration_s * 1e3, 100 * best.result.efficiency());
  const dist::CommPlan plan = dist::simulation_plan(net, best.config, args.workers, start.link, profile.batch);
  std::printf("layers: %s\n", dist::count_schemes(plan, net).c_str());
  std::printf("groups: %s\n", dist::describe_groups(plan).c_str());
  if (!args.out.empty()) {
    dist::PlanRecord record = dist::plan_record(plan, net, start.link);
    record.batch = profile.batch;
    record.tuned = dist::TunedOptions::of(best.config);
    dist::write_plan_file(args.out, record);
    std::printf("wrote %s (pin it with dist.plan_file and dist.scheme hybrid)\n", args.out.c_str());
  }
  return 0;
}

}  // namespace poseidon
