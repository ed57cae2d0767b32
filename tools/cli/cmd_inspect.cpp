// The inspection verbs: time (per-layer speed), summary (shapes, parameters,
// FLOPs) and layers (the registry).
#include <chrono>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "core/device_memory.h"
#include "core/finite_check.h"
#include "core/math.h"
#include "core/model_summary.h"
#include "core/net.h"
#include "core/registry.h"
#include "core/solver.h"
#include "tools/cli/commands.h"
#include "tools/cli/train_config.h"

namespace poseidon {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// A model from either a model file or a training config, with its defaults.
struct LoadedModel {
  ConfigNode model;
  int64_t batch = 0;
  int threads = 0;
  Device device;
  Precision precision = Precision::fp32;
  std::optional<bool> deterministic;
  bool momentum = true;  // a model file alone: assume the usual momentum buffers
};

LoadedModel load_any(const std::string& file, const std::vector<std::string>& overrides, int64_t default_batch) {
  if (is_train_config(file)) {
    TrainConfig c = TrainConfig::load(file, overrides);
    return {c.model, c.train_data.batch_size, c.threads, c.device, c.precision, c.deterministic,
            c.solver.momentum != 0};
  }
  return {load_model(file, overrides), default_batch, 0, Device{}, Precision::fp32, std::nullopt};
}

void fill_synthetic_inputs(Net& net) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (size_t i = 0; i < net.input_names().size(); ++i) {
    Tensor& t = net.blob(net.input_names()[i]).value;
    if (i == 0) {
      Tensor host(t.shape());
      for (int64_t k = 0; k < host.numel(); ++k) host[k] = normal(rng);
      t.copy_from(host);
    } else {
      t.zero();  // labels: class 0 is valid for every classifier
    }
  }
}

std::string human(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) v /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}
}  // namespace

int cmd_time(const TimeArgs& args) {
  LoadedModel m = load_any(args.file, args.overrides, 32);
  const int64_t batch = args.batch > 0 ? args.batch : m.batch;
  set_num_threads(args.threads > 0 ? args.threads : m.threads);
  const Device device = args.device.empty() ? m.device : Device::parse(args.device);
  device_memory::require(device);
  const double available = device_memory_bytes(device);
  const Precision precision = args.precision.empty() ? m.precision : parse_precision(args.precision);
  require_memory(summarize_model(m.model, batch, true, available, memory_name(device, available), precision), device,
                 available);
  Net net(m.model, batch, device);
  if (auto deterministic = args.deterministic ? args.deterministic : m.deterministic)
    device_memory::set_deterministic(device, *deterministic);
  net.set_precision(precision);
  net.fuse_relus();  // as training runs it
  net.init_params(1);
  fill_synthetic_inputs(net);
  SolverConfig sc;
  sc.momentum = 0.9;
  sc.lr.base_lr = 1e-5;  // small: timing must not drift into overflow
  Solver solver(sc);
  const size_t n = net.num_layers();
  std::vector<double> fwd(n, 0), bwd(n, 0);
  double update_ms = 0, check_ms = 0, zero_ms = 0;
  RunContext ctx{Phase::train, nullptr, device};
  std::mt19937_64 rng(1);
  ctx.rng = &rng;
  auto params = net.params();
  // GPU work is asynchronous: each timed piece waits for the device, so
  // per-layer times are real (the waits themselves cost a few microseconds).
  auto since = [&](Clock::time_point t0) {
    device_memory::synchronize(device);
    return ms_since(t0);
  };
  for (int64_t it = 0; it < args.warmup + args.iters; ++it) {
    // A fused ReLU runs nothing of its own (Net::fuse_relus): it is not timed.
    const bool timed = it >= args.warmup;
    for (size_t i = 0; i < n; ++i) {
      if (net.fused(i)) continue;
      auto t0 = Clock::now();
      net.forward_layer(i, ctx);
      if (timed) fwd[i] += since(t0);
    }
    // Part of every training step: the gradients backward adds into start
    // from zero (those a layer overwrites are left alone).
    auto t_zero = Clock::now();
    net.zero_blob_grads();
    net.seed_loss_grads();
    if (timed) zero_ms += since(t_zero);
    for (size_t i = n; i-- > 0;) {
      if (net.fused(i)) continue;
      auto t0 = Clock::now();
      net.backward_layer(i, ctx);
      if (timed) bwd[i] += since(t0);
    }
    // The trainer's solver.check_finite scan, timed on its own to show its share.
    auto t0 = Clock::now();
    if (auto bad = find_non_finite_gradient(net)) throw Error(bad->describe("non-finite gradient"));
    if (timed) check_ms += since(t0);
    t0 = Clock::now();
    for (Param* p : params) solver.update(*p);
    if (timed) update_ms += since(t0);
  }
  const double k = static_cast<double>(args.iters);
  double fwd_total = 0, bwd_total = 0;
  for (size_t i = 0; i < n; ++i) fwd_total += fwd[i] / k, bwd_total += bwd[i] / k;
  double iter_ms = fwd_total + zero_ms / k + bwd_total + check_ms / k + update_ms / k;
  if (device.is_cuda()) {
    // The iteration as training runs it, with no wait between layers.
    auto t0 = Clock::now();
    for (int64_t it = 0; it < args.iters; ++it) {
      for (size_t i = 0; i < n; ++i) net.forward_layer(i, ctx);
      net.zero_blob_grads();
      net.seed_loss_grads();
      for (size_t i = n; i-- > 0;) net.backward_layer(i, ctx);
      if (auto bad = find_non_finite_gradient(net)) throw Error(bad->describe("non-finite gradient"));
      for (Param* p : params) solver.update(*p);
    }
    iter_ms = since(t0) / k;
  }
  const double ips = batch * 1000.0 / iter_ms;
  if (args.json) {
    nlohmann::json out = {{"model", net.name()}, {"batch", batch}, {"threads", num_threads()}, {"device", device.str()},
                          {"precision", precision_name(net.precision())}, {"iters", args.iters}, {"forward_ms", fwd_total}, {"backward_ms", bwd_total},
                          {"zero_grads_ms", zero_ms / k}, {"update_ms", update_ms / k},
                          {"check_finite_ms", check_ms / k},
                          {"iteration_ms", iter_ms}, {"images_per_sec", ips}};
    out["layers"] = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) {
      out["layers"].push_back({{"name", net.layer(i).name()}, {"type", net.layer(i).type()},
                               {"precision", precision_name(net.layer(i).precision())}, {"fused", net.fused(i)},
                               {"forward_ms", fwd[i] / k}, {"backward_ms", bwd[i] / k}});
      if (std::string engine = net.layer(i).engine(); !engine.empty()) out["layers"].back()["engine"] = engine;
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s: batch %lld, %s, %s, %d threads, %lld iterations\n", net.name().c_str(),
              static_cast<long long>(batch), device.str().c_str(), precision_name(net.precision()), num_threads(),
              static_cast<long long>(args.iters));
  std::printf("%-24s %-14s %12s %12s\n", "layer", "type", "forward ms", "backward ms");
  for (size_t i = 0; i < n; ++i) {
    if (net.fused(i))  // its work is in the time of the layer before it
      std::printf("%-24s %-14s %12s %12s\n", net.layer(i).name().c_str(), net.layer(i).type().c_str(), "fused",
                  "fused");
    else
      std::printf("%-24s %-14s %12.3f %12.3f\n", net.layer(i).name().c_str(), net.layer(i).type().c_str(), fwd[i] / k,
                  bwd[i] / k);
  }
  std::printf(
      "forward %.3f ms  zero grads %.3f ms  backward %.3f ms  finite check %.3f ms  update %.3f ms  iteration %.3f ms  "
      "%.1f img/s\n",
      fwd_total, zero_ms / k, bwd_total, check_ms / k, update_ms / k, iter_ms, ips);
  return 0;
}

int cmd_summary(const SummaryArgs& args) {
  LoadedModel m = load_any(args.file, args.overrides, args.batch);
  const ModelSummary summary = summarize_model(m.model, args.batch, m.momentum, 0, "", m.precision);
  auto bytes = [](double b) { return static_cast<int64_t>(b); };
  auto memory_json = [&](const LayerMemory& mem) {
    return nlohmann::json{{"parameters", bytes(mem.parameters)}, {"gradients", bytes(mem.gradients)},
                          {"solver_state", bytes(mem.solver_state)}, {"activations", bytes(mem.activations)},
                          {"total", bytes(mem.total())}};
  };
  nlohmann::json layers = nlohmann::json::array();
  if (!args.json)
    std::printf("%-24s %-14s %-26s %14s %14s %14s\n", "layer", "type", "output", "params", "FLOPs", "train memory");
  for (const LayerSummary& l : summary.layers) {
    std::string out_str;
    for (const Shape& o : l.outputs) out_str += (out_str.empty() ? "" : " ") + shape_str(o);
    layers.push_back({{"name", l.name}, {"type", l.type}, {"outputs", l.outputs}, {"params", l.params},
                      {"flops", static_cast<int64_t>(l.flops)}, {"memory_bytes", memory_json(l.memory)}});
    if (!args.json)
      std::printf("%-24s %-14s %-26s %14lld %14s %14s\n", l.name.c_str(), l.type.c_str(), out_str.c_str(),
                  static_cast<long long>(l.params), human(l.flops).c_str(), bytes_text(l.memory.total()).c_str());
  }
  const LayerMemory memory = summary.memory();
  if (args.json) {
    nlohmann::json out = {{"model", summary.name},
                          {"batch", args.batch},
                          {"layers", layers},
                          {"total_params", summary.params()},
                          {"total_flops", static_cast<int64_t>(summary.flops())},
                          {"solver_state_counted", summary.momentum},
                          {"inputs_memory_bytes", bytes(summary.inputs.total())},
                          {"memory_bytes", memory_json(memory)}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("total: %lld parameters (%s), %s FLOPs per forward pass at batch %lld\n",
              static_cast<long long>(summary.params()), human(static_cast<double>(summary.params())).c_str(),
              human(summary.flops()).c_str(), static_cast<long long>(args.batch));
  std::printf("training memory at batch %lld: %s (parameters %s, gradients %s, solver state %s, activations %s "
              "of which inputs %s; layers' working buffers not counted)\n",
              static_cast<long long>(args.batch), bytes_text(memory.total()).c_str(),
              bytes_text(memory.parameters).c_str(), bytes_text(memory.gradients).c_str(),
              bytes_text(memory.solver_state).c_str(), bytes_text(memory.activations).c_str(),
              bytes_text(summary.inputs.total()).c_str());
  return 0;
}

int cmd_layers(bool json) {
  nlohmann::json out = nlohmann::json::array();
  for (const LayerInfo* info : LayerRegistry::instance().all()) {
    std::string plugin = LayerRegistry::instance().origin(info->type);
    std::string from = plugin.empty() ? "" : " [plug-in " + plugin + "]";
    if (!json) std::printf("%s: %s%s\n", info->type.c_str(), info->summary.c_str(), from.c_str());
    nlohmann::json keys = nlohmann::json::array();
    for (const auto& k : info->keys) {
      keys.push_back({{"key", k.key}, {"type", k.type}, {"default", k.default_value}, {"help", k.help}});
      if (!json)
        std::printf("    %-18s %-8s %-22s %s\n", k.key.c_str(), k.type.c_str(),
                    k.default_value.empty() ? "(required)" : ("= " + k.default_value).c_str(), k.help.c_str());
    }
    out.push_back({{"type", info->type}, {"summary", info->summary}, {"keys", keys}, {"plugin", plugin}});
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace poseidon
