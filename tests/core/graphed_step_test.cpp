// A training step captured as a CUDA graph and replayed (core/graphed_step.h,
// core/step_graph.h) on a GPU, in tools/gpu_check.sh: a net with conv,
// batch norm, ReLU, pooling, fc and dropout trained ten steps through
// GraphedStep (three plain, one captured, six replayed) ends bit for bit
// where the same steps run uncaptured end, in float32 and bf16: parameters,
// running statistics, losses, the solver's step counts and the RNG. A
// capture made to fail (a host wait inside the step) is reported, falls
// back to plain steps and still trains bit for bit as uncaptured. The
// graph wrapper alone replays what it captured and, for a step that
// throws, waits or requests memory, says why, keeps no graph and leaves the
// stream usable. Replayed steps read late make no host wait and no GPU
// memory request (counted). Without a GPU the tests skip (gpu_required.h).
#include "core/graphed_step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>

#include "core/device_memory.h"
#include "core/device_pipeline.h"
#include "core/error.h"
#include "core/step_gate.h"
#include "gpu_required.h"

namespace poseidon {
namespace {

constexpr const char* kModel = R"(name: graphed
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 3, pad: 1}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 16}
  - {name: drop1, type: dropout, ratio: 0.3}
  - {name: fc2, type: fc, num_output: 5}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

struct Trained {
  Tensor values, buffers;
  std::vector<float> losses;
  std::map<std::string, int64_t> steps;
  std::mt19937_64 rng;
  std::vector<StepMode> modes;
  std::string notes;
};

Tensor on_host(const Tensor& t) {
  Tensor copy(t.shape());
  copy.copy_from(t);
  return copy;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0;
}

// Ten steps of adam with a cosine schedule through a GraphedStep in `mode`;
// `fail_capture` puts a host wait into the step, which no capture allows.
Trained train(Precision precision, CudaGraphMode mode, bool fail_capture) {
  const Device gpu = Device::cuda(0);
  Net net(ConfigNode::parse(kModel, "model.yaml"), 4, gpu);
  if (precision != Precision::fp32) net.set_precision(precision);
  net.init_params(3);
  Solver solver(SolverConfig::parse(
      ConfigNode::parse("{type: adam, lr: 0.01, weight_decay: 0.001, lr_policy: cosine, max_iter: 10}", "solver")));
  LocalGradSink held(solver, true);
  StepGate gate(net, solver);
  Trained t;
  t.rng.seed(5);
  CaptureFacts facts = net_capture_facts(net, mode);
  facts.reads_late = true;
  GraphedStep graphed(gpu, facts, {&t.rng, &solver, &held});
  for (int64_t k = 0; k < 10; ++k) {
    Tensor data({4, 3, 8, 8}), label({4});
    std::mt19937_64 draw(100 + k);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < data.numel(); ++i) data[i] = normal(draw);
    for (int64_t i = 0; i < label.numel(); ++i) label[i] = float((i + k) % 5);
    net.blob("data").value.copy_from(data);
    net.blob("label").value.copy_from(label);
    solver.set_iteration(k);
    RunContext ctx{Phase::train, &t.rng, gpu};
    graphed.run([&] {
      net.run_forward(ctx);
      net.backward(ctx, held);
      gate.close_on_device(held);
      if (fail_capture) device_memory::synchronize(gpu);
    });
    gate.closed(int(k % 2));
    t.modes.push_back(graphed.last_mode());
    t.notes += graphed.take_note();
    const StepGate::Reading r = gate.read(int(k % 2));
    EXPECT_TRUE(r.finite) << k;
    t.losses.push_back(r.loss);
    net.check_forward();
  }
  t.values = on_host(net.flat_values());
  t.buffers = on_host(net.flat_buffers());
  t.steps = solver.steps();
  return t;
}

void expect_same_training(const Trained& a, const Trained& b) {
  EXPECT_TRUE(same_bits(a.values, b.values)) << "parameters differ";
  EXPECT_TRUE(same_bits(a.buffers, b.buffers)) << "running statistics differ";
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t k = 0; k < a.losses.size(); ++k)
    EXPECT_EQ(std::memcmp(&a.losses[k], &b.losses[k], sizeof(float)), 0)
        << "step " << k << ": " << a.losses[k] << " vs " << b.losses[k];
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_TRUE(a.rng == b.rng) << "the RNG was drawn a different number of times";
}

const StepMode P = StepMode::plain, C = StepMode::capture, R = StepMode::replay;

void expect_replays_equal_plain(Precision precision) {
  const Trained plain = train(precision, CudaGraphMode::off, false);
  const Trained graphed = train(precision, CudaGraphMode::automatic, false);
  EXPECT_EQ(plain.modes, std::vector<StepMode>(10, P));
  EXPECT_EQ(graphed.modes, (std::vector<StepMode>{P, P, P, C, R, R, R, R, R, R})) << graphed.notes;
  EXPECT_NE(graphed.notes.find("captured and replayed"), std::string::npos) << graphed.notes;
  expect_same_training(plain, graphed);
  EXPECT_EQ(plain.steps.at("fc1.weight"), 10);
}

TEST(CudaGraphedStep, ReplaysTrainBitwiseAsPlainSteps) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_replays_equal_plain(Precision::fp32);
}

TEST(CudaGraphedStep, ReplaysTrainBitwiseAsPlainStepsInBf16) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_replays_equal_plain(Precision::bf16);
}

TEST(CudaGraphedStep, AFailedCaptureFallsBackAndTrainsAsPlainSteps) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Trained plain = train(Precision::fp32, CudaGraphMode::off, false);
  const Trained failed = train(Precision::fp32, CudaGraphMode::automatic, true);
  EXPECT_EQ(failed.modes, std::vector<StepMode>(10, P));
  EXPECT_NE(failed.notes.find("the capture failed, steps run uncaptured from here: "), std::string::npos)
      << failed.notes;
  expect_same_training(plain, failed);
}

// A replayed step as the trainer runs it (each step's loss and finite flag
// read after the next is issued) makes no host wait and no GPU memory
// request: counted (device_memory::device_counts) over three replays.
TEST(CudaGraphedStep, AReplayedStepNeitherWaitsNorAllocates) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  Net net(ConfigNode::parse(kModel, "model.yaml"), 4, gpu);
  net.init_params(3);
  Solver solver(
      SolverConfig::parse(ConfigNode::parse("{type: adam, lr: 0.01, lr_policy: cosine, max_iter: 9}", "solver")));
  LocalGradSink held(solver, true);
  StepGate gate(net, solver);
  std::mt19937_64 rng(5);
  CaptureFacts facts = net_capture_facts(net, CudaGraphMode::automatic);
  facts.reads_late = true;
  GraphedStep graphed(gpu, facts, {&rng, &solver, &held});
  Tensor data({4, 3, 8, 8}), label({4});
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = float(i % 7) - 3.f;
  for (int64_t i = 0; i < label.numel(); ++i) label[i] = float(i % 5);
  net.blob("data").value.copy_from(data);
  net.blob("label").value.copy_from(label);
  RunContext ctx{Phase::train, &rng, gpu};
  bool all_finite = true;
  std::vector<StepMode> modes;
  auto step = [&](int64_t k) {
    solver.set_iteration(k);
    graphed.run([&] {
      net.run_forward(ctx);
      net.backward(ctx, held);
      gate.close_on_device(held);
    });
    gate.closed(int(k % 2));
    modes.push_back(graphed.last_mode());
    if (k > 0) {
      net.check_forward();
      all_finite = all_finite && gate.read(int((k - 1) % 2)).finite;
    }
  };
  for (int64_t k = 0; k < 6; ++k) step(k);
  const device_memory::DeviceCounts before = device_memory::device_counts(gpu);
  for (int64_t k = 6; k < 9; ++k) step(k);
  const device_memory::DeviceCounts after = device_memory::device_counts(gpu);
  EXPECT_EQ(modes, (std::vector<StepMode>{P, P, P, C, R, R, R, R, R})) << graphed.take_note();
  EXPECT_EQ(after.host_waits - before.host_waits, 0) << "host waits in 3 replayed steps";
  EXPECT_EQ(after.allocations - before.allocations, 0) << "GPU memory requests in 3 replayed steps";
  EXPECT_EQ(after.driver_allocations - before.driver_allocations, 0) << "cudaMalloc calls in 3 replayed steps";
  EXPECT_TRUE(all_finite);
}

TEST(CudaStepGraph, ReplaysWhatItCaptured) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  Tensor a({1000}, gpu), b({1000}, gpu);
  StepGraph graph(gpu);
  EXPECT_EQ(graph.capture([&] {
    a.fill(3.f);
    b.copy_from(a);
  }),
            "");
  ASSERT_TRUE(graph.ready());
  EXPECT_EQ(on_host(b)[999], 0.f) << "a capture runs nothing";
  graph.launch();
  EXPECT_EQ(on_host(b)[999], 3.f);
  b.fill(0.f);
  graph.launch();
  EXPECT_EQ(on_host(b)[0], 3.f);
}

TEST(CudaStepGraph, AFailedCaptureSaysWhyAndLeavesTheStreamUsable) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  Tensor a({1000}, gpu);
  StepGraph graph(gpu);
  EXPECT_EQ(graph.capture([&] {
    a.fill(1.f);
    throw Error("planted");
  }),
            "planted");
  EXPECT_FALSE(graph.ready());
  EXPECT_NE(graph.capture([&] { device_memory::synchronize(gpu); }), "");
  EXPECT_FALSE(graph.ready());
  {
    Tensor cached({64}, gpu);  // a block the allocator hands out again, with no cudaMalloc
    cached.fill(7.f);
  }
  std::optional<Tensor> made;
  EXPECT_EQ(graph.capture([&] { made.emplace(Shape{64}, gpu); }),
            "the step requests GPU memory, which a replay would not do");
  EXPECT_FALSE(graph.ready());
  // Its zeroing would have been recorded and never run: the plain rerun of
  // the step would read the block's old sevens.
  EXPECT_FALSE(made.has_value()) << "a tensor was made while the step was captured";
  a.fill(2.f);
  EXPECT_EQ(on_host(a)[5], 2.f);
}

}  // namespace
}  // namespace poseidon
