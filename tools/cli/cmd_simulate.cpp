// The simulate verb: iteration time, speed-up and link use of distributed
// training on P ranks as the discrete-event model of dist/sim/simulate.h
// predicts them, one row per combination of scheme, WFBP, bandwidth and P.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/net.h"
#include "core/units.h"
#include "dist/sim/simulate.h"
#include "tools/cli/commands.h"
#include "tools/cli/train_config.h"

namespace poseidon {

namespace {

struct Row {
  std::string scheme;
  bool wfbp = true;
  double bandwidth_gbps = 0;
  dist::SimResult result;
};

nlohmann::json row_json(const Row& row) {
  const dist::SimResult& r = row.result;
  nlohmann::json links = nlohmann::json::array();
  for (size_t i = 0; i < r.links.size(); ++i)
    links.push_back({{"rank", i}, {"send_busy_ms", r.links[i].send_s * 1e3}, {"recv_busy_ms", r.links[i].recv_s * 1e3}});
  return {{"scheme", row.scheme},
          {"wfbp", row.wfbp},
          {"workers", r.workers},
          {"bandwidth_gbps", row.bandwidth_gbps},
          {"iteration_ms", r.iteration_s * 1e3},
          {"speedup", r.speedup()},
          {"efficiency", r.efficiency()},
          {"mean_link_utilisation", r.mean_utilisation()},
          {"max_link_utilisation", r.max_utilisation()},
          {"bytes_per_worker", r.bytes_per_worker},
          {"layer_schemes", r.schemes},
          {"links", links}};
}

void print_row(const Row& row, bool per_rank) {
  const dist::SimResult& r = row.result;
  std::printf("%-10s %-5s %6d %8.4g %11.3f %9.2f %10.1f%% %9.1f%% %9.1f%% %14.3f\n", row.scheme.c_str(),
              row.wfbp ? "on" : "off", r.workers, row.bandwidth_gbps, r.iteration_s * 1e3, r.speedup(),
              100 * r.efficiency(), 100 * r.mean_utilisation(), 100 * r.max_utilisation(), r.bytes_per_worker / 1e6);
  if (!per_rank) return;
  for (size_t i = 0; i < r.links.size(); ++i)
    std::printf("    rank %-5zu send busy %10.3f ms (%5.1f%%)  receive busy %10.3f ms (%5.1f%%)\n", i,
                r.links[i].send_s * 1e3, r.iteration_s > 0 ? 100 * r.links[i].send_s / r.iteration_s : 0.0,
                r.links[i].recv_s * 1e3, r.iteration_s > 0 ? 100 * r.links[i].recv_s / r.iteration_s : 0.0);
}

}  // namespace

int cmd_simulate(const SimulateArgs& args) {
  auto [model, batch, dist_config] = load_dist_model(args.file, args.overrides, args.batch);
  if (!args.order.empty()) dist_config.order = dist::parse_send_order(args.order);
  Net net(model, 1);  // shapes only: the per-rank batch enters through the profile

  std::string gemm_source = "given";
  dist::ComputeProfile profile;
  double gflops = args.gemm_gflops;
  if (!args.profile.empty()) {
    profile = dist::load_profile(args.profile, net);
    if (args.batch > 0 && args.batch != profile.batch)
      throw Error("profile " + args.profile + " is for batch " + std::to_string(profile.batch) + ", not --batch " +
                  std::to_string(args.batch));
    if (gflops <= 0 && profile.gemm_gflops) {
      gflops = *profile.gemm_gflops;
      gemm_source = profile.gemm_from_fc_layers ? "from the profile's fc layers" : "from the profile";
    }
  }
  if (gflops <= 0) {
    gflops = dist::measure_gemm_gflops();
    gemm_source = "measured here";
  }
  // Where the per-layer times come from: they decide every number below.
  std::string compute_source = "measured, from the profile " + args.profile;
  if (args.profile.empty()) {
    profile = dist::flops_profile(net, batch, gflops);
    compute_source = "estimated: " + profile.source + " (" +
                     (gemm_source == "given" ? "the rate --gflops gave" : "a GEMM timed on this machine") + ")";
    if (gemm_source != "given")
      std::fprintf(stderr,
                   "warning: no --profile: the compute times are an estimate from this machine's GEMM rate "
                   "(%s GFLOP/s), not measured layer times; pass --profile with `poseidon time --json` output "
                   "for the device to simulate (profiles/ holds some)\n",
                   human_number(gflops).c_str());
  }

  dist::SimConfig config;
  config.dist = dist_config;
  config.iterations = args.iterations;
  config.link.latency_us = args.latency_us >= 0 ? args.latency_us : dist_config.latency_us.value_or(20);
  config.link.gemm_gflops = gflops;
  std::vector<dist::SchemeChoice> schemes;
  for (const std::string& name : args.schemes) schemes.push_back(dist::parse_scheme_choice(name));
  if (schemes.empty()) schemes.push_back(dist_config.scheme);
  std::vector<bool> wfbps;
  for (const std::string& w : args.wfbp) wfbps.push_back(w == "true");
  if (wfbps.empty()) wfbps.push_back(dist_config.wfbp);

  std::vector<Row> rows;
  for (dist::SchemeChoice scheme : schemes)
    for (bool wfbp : wfbps)
      for (double bandwidth : args.bandwidth_gbps)
        for (int workers : args.workers) {
          config.dist.scheme = scheme;
          config.dist.wfbp = wfbp;
          config.link.bandwidth_gbps = bandwidth;
          config.workers = workers;
          rows.push_back(Row{dist::choice_name(scheme), wfbp, bandwidth, dist::simulate(net, profile, config)});
        }

  if (args.json) {
    nlohmann::json runs = nlohmann::json::array();
    for (const Row& row : rows) runs.push_back(row_json(row));
    nlohmann::json out = {{"model", net.name()},
                          {"profile", profile.source},
                          {"batch", profile.batch},
                          {"single_iteration_ms", profile.iteration_s() * 1e3},
                          {"latency_us", config.link.latency_us},
                          {"gemm_gflops", gflops},
                          {"gemm_source", gemm_source},
                          {"compute_source", compute_source},
                          {"order", dist::order_name(dist_config.order)},
                          {"iterations", args.iterations},
                          {"runs", runs}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s: batch %lld per worker, one worker %s per iteration\n", net.name().c_str(),
              static_cast<long long>(profile.batch), human_seconds(profile.iteration_s()).c_str());
  std::printf("compute times: %s\n", compute_source.c_str());
  std::printf("latency %.4g us; SFB rebuild at %.4g GFLOP/s (%s); order %s; %d iterations simulated\n",
              config.link.latency_us, gflops, gemm_source.c_str(), dist::order_name(dist_config.order).c_str(), args.iterations);
  std::printf("%-10s %-5s %6s %8s %11s %9s %11s %10s %10s %14s\n", "scheme", "wfbp", "P", "Gbit/s", "iter ms",
              "speed-up", "efficiency", "link use", "max link", "MB/worker/it");
  for (const Row& row : rows) print_row(row, args.per_rank);
  std::printf(
      "speed-up: throughput against one worker; efficiency: speed-up / P. It can pass 100%%: one worker runs\n"
      "forward, backward and the update in turn, while on P ranks the updates run on the communication thread\n"
      "beside the next iteration's compute (and the parameter server splits them among the block owners).\n");
  return 0;
}

}  // namespace poseidon
