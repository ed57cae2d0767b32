// Emulated compute (--emulate-compute): an iteration takes at least the
// profile's scaled time, the gates and gradient reports fire as in real
// training, a LocalGradSink still updates every parameter from its gradient
// buffer, while the EmulatedUpdateSink waits the profile's update time
// instead; profiles that do not fit the run are refused; and training at a
// known iteration time reports that rate.
#include "dist/schemes/emulated_compute.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/local_sink.h"
#include "tools/cli_runner.h"

namespace poseidon {
namespace {
using dist::emulate_compute;
using dist::EmulatedCompute;
using dist::EmulatedUpdateSink;

const char* kModel = R"(name: small
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 5}
  - {name: relu1, type: relu, inputs: fc1}
  - {name: fc2, type: fc, inputs: relu1, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
  - {name: acc, type: accuracy, inputs: [fc2, label]}
)";

Net make_net(int64_t batch) {
  Net net(ConfigNode::parse(kModel, "model.yaml"), batch);
  net.init_params(7);
  return net;
}

// A profile in `poseidon time --json` form: every layer 4 ms forward and 6 ms
// backward, except the accuracy layer, which never runs backward.
std::string write_profile(int64_t batch, const std::string& device = "") {
  const auto path = std::filesystem::temp_directory_path() /
                    ("emulate_compute_test_" + std::to_string(::getpid()) + "_" + std::to_string(batch) + ".json");
  std::ofstream out(path);
  out << R"({"batch": )" << batch << device << R"(, "layers": [
    {"name": "fc1", "forward_ms": 4, "backward_ms": 6},
    {"name": "relu1", "forward_ms": 4, "backward_ms": 6},
    {"name": "fc2", "forward_ms": 4, "backward_ms": 6},
    {"name": "loss", "forward_ms": 4, "backward_ms": 6},
    {"name": "acc", "forward_ms": 4, "backward_ms": 0}]})";
  return path.string();
}

// Records what the Net tells a GradSink, in order.
struct RecordingSink : GradSink {
  std::vector<std::string> events;
  void await_params(const Layer& layer) override { events.push_back("await " + layer.name()); }
  void grad_ready(Param& p) override { events.push_back("ready " + p.name); }
  void backward_done() override { events.push_back("done"); }
};

std::vector<std::string> one_iteration_events(Net& net) {
  RunContext ctx;
  RecordingSink sink;
  net.forward(ctx, &sink);
  net.backward(ctx, sink);
  return sink.events;
}

TEST(EmulateCompute, IterationTakesAtLeastTheScaledProfile) {
  Net net = make_net(4);
  const std::string profile = write_profile(4);
  const double scale = 1.5;
  const double total = emulate_compute(net, profile, scale, 4).layers_s;
  // 5 forwards of 4 ms and 4 backwards of 6 ms, times 1.5.
  EXPECT_NEAR(total, 1.5 * (5 * 4e-3 + 4 * 6e-3), 1e-12);
  RunContext ctx;
  Solver solver(SolverConfig{});
  LocalGradSink sink(solver);
  // A wait that overran is made up for by the next ones, so iterations are
  // counted from the first: k of them take at least k times the profile.
  const auto start = std::chrono::steady_clock::now();
  for (int iteration = 1; iteration <= 3; ++iteration) {
    net.forward(ctx, &sink);
    net.backward(ctx, sink);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(elapsed, iteration * total) << "iteration " << iteration;
  }
  std::filesystem::remove(profile);
}

TEST(EmulateCompute, GatesAndGradientReportsAsInRealTraining) {
  Net real = make_net(4);
  Net emulated = make_net(4);
  const std::string profile = write_profile(4);
  emulate_compute(emulated, profile, 0.01, 4);
  const std::vector<std::string> expected = one_iteration_events(real);
  EXPECT_EQ(one_iteration_events(emulated), expected);
  EXPECT_EQ(std::count(expected.begin(), expected.end(), "done"), 1);
  std::filesystem::remove(profile);
}

TEST(EmulateCompute, SolverStillUpdatesFromTheGradientBuffers) {
  Net net = make_net(4);
  const std::string profile = write_profile(4);
  emulate_compute(net, profile, 0.01, 4);
  // The emulated backward leaves the gradient buffers as they are: what they
  // hold is what the solver applies, through the usual reports.
  net.flat_grads().fill(0.25f);
  std::map<std::string, std::vector<float>> before;
  for (Param* p : net.params())
    if (p->learnable) before[p->name].assign(p->value.data(), p->value.data() + p->value.numel());
  ASSERT_EQ(before.size(), 4u);  // fc1 and fc2, weight and bias
  SolverConfig config;
  config.lr.base_lr = 0.5;
  Solver solver(config);
  LocalGradSink sink(solver);
  RunContext ctx;
  net.forward(ctx, &sink);
  net.backward(ctx, sink);
  for (Param* p : net.params()) {
    if (!p->learnable) continue;
    for (int64_t i = 0; i < p->value.numel(); ++i)
      ASSERT_FLOAT_EQ(p->value[i], before[p->name][static_cast<size_t>(i)] - 0.5f * 0.25f) << p->name << " " << i;
  }
  std::filesystem::remove(profile);
}

TEST(EmulateCompute, DeviceCostsComeFromTheProfileScaled) {
  Net net = make_net(4);
  // 53 learnable parameters: fc1 6 x 5 + 5, fc2 5 x 3 + 3.
  ASSERT_EQ(net.num_learnable(), 53);
  const std::string profile = write_profile(4, R"(, "update_ms": 10, "gflops": 2, "memory_gbps": 4)");
  const EmulatedCompute e = emulate_compute(net, profile, 3, 4);
  EXPECT_NEAR(e.device.update_s(53), 3 * 10e-3, 1e-15);
  EXPECT_NEAR(e.device.gemm_gflops, 2.0 / 3, 1e-15);
  EXPECT_NEAR(e.device.memory_gbps, 4.0 / 3, 1e-15);
  std::filesystem::remove(profile);
}

TEST(EmulateCompute, UpdatesBecomeWaitsAndChangeNothing) {
  Net net = make_net(4);
  const std::string profile = write_profile(4, R"(, "update_ms": 40)");
  const EmulatedCompute e = emulate_compute(net, profile, 1, 4);
  net.flat_grads().fill(0.25f);
  const std::vector<float> before(net.flat_values().data(), net.flat_values().data() + net.flat_values().numel());
  EmulatedUpdateSink sink(e.device);
  RunContext ctx;
  const auto start = std::chrono::steady_clock::now();
  for (int iteration = 1; iteration <= 2; ++iteration) {
    net.forward(ctx, &sink);
    net.backward(ctx, sink);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(elapsed, iteration * (e.layers_s + 40e-3)) << "iteration " << iteration;
  }
  for (int64_t i = 0; i < net.flat_values().numel(); ++i)
    ASSERT_EQ(net.flat_values()[i], before[static_cast<size_t>(i)]) << i;
  std::filesystem::remove(profile);
}

TEST(EmulateCompute, RefusesAProfileOfAnotherBatchOrABadScale) {
  Net net = make_net(8);
  const std::string profile = write_profile(4);
  EXPECT_THROW(emulate_compute(net, profile, 1.0, 8), Error);
  EXPECT_THROW(emulate_compute(net, profile, 0.0, 4), Error);
  EXPECT_THROW(emulate_compute(net, "/nonexistent/profile.json", 1.0, 8), Error);
  std::filesystem::remove(profile);
}

// Training whose iterations take a known time shows that rate: the layers
// wait 5 x 4 ms forward and 4 x 6 ms backward and the update 8 ms, 52 ms an
// iteration, ten times longer at --emulate-scale 10 (so that a busy
// machine's scheduling delays stay small beside it), so 4 images an
// iteration train at 7.69 img/s. A test every 2 iterations (emulated too)
// must not lower the rate of its interval.
TEST(EmulateCompute, TrainingShowsTheRateOfTheKnownIterationTime) {
  testing::TempDir d;
  d.write("model.yaml", kModel);
  const std::string profile = write_profile(4, R"(, "update_ms": 8)");
  const std::string config =
      d.write("config.yaml",
              "model: model.yaml\nthreads: 1\ndata:\n"
              "  train: {source: synthetic, shape: [6], num_classes: 3, size: 64, batch_size: 4}\n"
              "  test: {source: synthetic, shape: [6], num_classes: 3, size: 16, batch_size: 4}\n"
              "solver: {lr: 0.01, max_iter: 6}\n"
              "train: {display: 2, test_interval: 2, test_iters: 1, output_dir: " +
                  d.file("out") + "}\n");
  testing::CliResult r =
      testing::run_poseidon("train " + config + " --emulate-compute " + profile + " --emulate-scale 10");
  ASSERT_EQ(r.status, 0) << r.err;
  const double expected = 4 / 0.52;
  std::ifstream in(d.file("out/metrics.jsonl"));
  int train_records = 0;
  nlohmann::json summary;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["type"] == "train") {
      ++train_records;
      EXPECT_NEAR(record["images_per_sec"].get<double>(), expected, 0.05 * expected) << line;
    }
    if (record["type"] == "summary") summary = record;
  }
  EXPECT_EQ(train_records, 3);
  ASSERT_FALSE(summary.is_null()) << "no summary record";
  EXPECT_NEAR(summary["images_per_sec_steady"].get<double>(), expected, 0.05 * expected);
  EXPECT_EQ(summary["steady_from_iter"], 3);
  EXPECT_NE(r.err.find("run summary: iterations 1-6"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace poseidon
