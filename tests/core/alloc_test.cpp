// Steady-state training iterations allocate nothing: forward, backward, the
// finite check and the solver updates of a Net (held, immediate, or through
// the step's finite guard read an iteration late as the trainer does), counted
// after two warm-up iterations (which create the momentum state). The one
// exception is oneDNN, whose primitive execution builds its argument map on
// the heap at every call (7 small allocations, freed before it returns; its
// 2.6 API has no way around it): these tests run convolutions on the
// engine's own im2col path and fully connected layers on BLAS, and the last
// tests hold the oneDNN paths, in float32 and in bf16 (convolutions on small
// images as matrix products among them), to a constant number of
// allocations per iteration, all freed, so memory cannot grow however long
// training runs. Buffers oneDNN's kernels take from malloc themselves (its
// JIT GEMM's, in the fc layer's float32 backward products) are outside
// operator new and so outside this count.
// Counting replaces the global operator new of this test binary (so of every
// core test), but counts only inside a CountAllocations scope. Tensor storage
// is made through std::make_shared, so a new tensor is counted too. The data
// loader stays outside: it prepares batches on its own threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../counted_new.inc"
#include "core/finite_check.h"
#include "core/local_sink.h"
#include "core/net.h"
#include "core/step_gate.h"
#include "tools/cli/train_config.h"

namespace poseidon {
namespace {

// Counts operator new calls, from any thread, while alive.
class CountAllocations {
 public:
  CountAllocations() {
    allocations = 0;
    bytes_outstanding = 0;
    counting = true;
  }
  ~CountAllocations() { counting = false; }
  int64_t count() const { return allocations.load(); }
  int64_t bytes_kept() const { return bytes_outstanding.load(); }
};

// The model with every convolution on the im2col path (`engine: im2col`)
// and every fully connected layer on BLAS (`engine: blas`).
ConfigNode without_onednn(ConfigNode model) {
  YAML::Node root = model.yaml();
  for (YAML::Node layer : root["layers"]) {
    if (layer["type"].as<std::string>() == "conv") layer["engine"] = "im2col";
    if (layer["type"].as<std::string>() == "fc") layer["engine"] = "blas";
  }
  return model;
}

// Batch norm, dropout, concat, sum, both poolings, adaptive pooling, flatten,
// softmax and accuracy: every layer with scratch state of its own; bn1 and
// added take the ReLUs after them (Net::fuse_relus).
const char* kMixedModel = R"(name: mixed
inputs: {data: [3, 12, 12], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 6, kernel_size: 3, pad: 1}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: left, type: conv, inputs: relu1, num_output: 4, kernel_size: 1}
  - {name: right, type: conv, inputs: relu1, num_output: 4, kernel_size: 3, pad: 1, groups: 2, bias: false}
  - {name: joined, type: concat, inputs: [left, right]}
  - {name: skip, type: conv, inputs: relu1, num_output: 8, kernel_size: 1}
  - {name: added, type: sum, inputs: [joined, skip], coefficients: [1, 0.5]}
  - {name: added_relu, type: relu}
  - {name: pool1, type: pool, mode: max, kernel_size: 3, stride: 2, ceil_mode: true}
  - {name: pool2, type: pool, mode: avg, kernel_size: 2, pad: 1, count_include_pad: false}
  - {name: squeeze, type: adaptive_avg_pool, output_size: [2, 3]}
  - {name: flat, type: flatten}
  - {name: drop, type: dropout, ratio: 0.3}
  - {name: fc1, type: fc, num_output: 5}
  - {name: probs, type: softmax, inputs: fc1}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
  - {name: accuracy, type: accuracy, inputs: [fc1, label]}
)";

struct Counted {
  std::vector<int64_t> allocations;  // per iteration
  int64_t bytes_kept = 0;            // allocated during the iterations and not freed by their end
};

// Counts `iterations` forward + backward + check + update iterations, one by
// one, after two warm-up iterations. `read_late`: as the trainer runs alone,
// the check and the held updates through a StepGate, each iteration read
// after the next one is closed.
Counted count_steady_state(const ConfigNode& model, bool hold_updates, int iterations = 3,
                           Precision precision = Precision::fp32, bool read_late = false) {
  Net net(model, 4);
  net.set_precision(precision);
  net.fuse_relus();  // as training runs it
  net.init_params(1);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  Tensor& data = net.blob(net.input_names()[0]).value;
  Tensor& labels = net.blob(net.input_names()[1]).value;
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = normal(rng);
  for (int64_t i = 0; i < labels.numel(); ++i) labels[i] = static_cast<float>(i % 2);

  SolverConfig config;
  config.momentum = 0.9;
  config.weight_decay = 1e-4;
  config.lr.base_lr = 0.01;
  Solver solver(config);
  LocalGradSink sink(solver, hold_updates);
  RunContext train_ctx{Phase::train, &rng, {}};
  RunContext test_ctx{Phase::test, nullptr, {}};
  int64_t iter = 0;
  bool all_finite = true;
  std::optional<StepGate> gate;
  if (read_late) gate.emplace(net, solver);
  auto iteration = [&] {
    solver.set_iteration(iter);
    if (gate) {
      net.run_forward(train_ctx);
      net.backward(train_ctx, sink);
      gate->close(int(iter % 2), sink);
      if (iter > 0) {
        net.check_forward();
        all_finite = all_finite && gate->read(int((iter - 1) % 2)).finite;
      }
    } else {
      net.forward(train_ctx);
      net.backward(train_ctx, sink);
      all_finite = all_finite && !find_non_finite_gradient(net);
      sink.apply_held();
    }
    ++iter;
    net.forward(test_ctx);
  };
  iteration();
  iteration();
  Counted counted;
  counted.allocations.reserve(iterations);  // before counting starts
  CountAllocations count;
  for (int k = 0; k < iterations; ++k) {
    const int64_t before = count.count();
    iteration();
    counted.allocations.push_back(count.count() - before);
  }
  counted.bytes_kept = count.bytes_kept();
  EXPECT_TRUE(all_finite);
  return counted;
}

void expect_steady_state_allocates_nothing(const ConfigNode& model, bool hold_updates, bool read_late = false) {
  const Counted counted = count_steady_state(without_onednn(model), hold_updates, 3, Precision::fp32, read_late);
  for (size_t k = 0; k < counted.allocations.size(); ++k)
    EXPECT_EQ(counted.allocations[k], 0) << model.yaml()["name"].as<std::string>() << ", iteration " << k
                                         << (hold_updates ? ", held updates" : ", immediate updates");
}

TEST(Allocations, CountingSeesAllocations) {
  int64_t counted = 0;
  {
    CountAllocations count;
    Tensor t({3});
    counted = count.count();
  }
  EXPECT_GT(counted, 0);
}

TEST(Allocations, SteadyStateLenetAllocatesNothing) {
  ConfigNode model = load_model(std::string(POSEIDON_SOURCE_DIR) + "/models/lenet.yaml", {});
  expect_steady_state_allocates_nothing(model, true);
  expect_steady_state_allocates_nothing(model, false);
}

TEST(Allocations, SteadyStateCifar10QuickAllocatesNothing) {
  expect_steady_state_allocates_nothing(load_model(std::string(POSEIDON_SOURCE_DIR) + "/models/cifar10_quick.yaml", {}),
                                        true);
}

TEST(Allocations, SteadyStateOfEveryStatefulLayerAllocatesNothing) {
  ConfigNode model = ConfigNode::parse(kMixedModel, "mixed.yaml");
  expect_steady_state_allocates_nothing(model, true);
  expect_steady_state_allocates_nothing(model, false);
  expect_steady_state_allocates_nothing(model, true, true);
}

// Convolutions on 4x4, 2x2 and 1x1 images, with and without bias, which
// oneDNN runs as matrix products (layers/conv_matmul.h).
const char* kSmallImagesModel = R"(name: small_images
inputs: {data: [16, 4, 4], label: []}
layers:
  - {name: conv1, type: conv, num_output: 32, kernel_size: 3, pad: 1}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, mode: max, kernel_size: 2}
  - {name: conv2, type: conv, num_output: 32, kernel_size: [1, 3], pad: [0, 1], bias: false}
  - {name: conv3, type: conv, num_output: 32, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

// An fc layer of 4096 outputs, whose backward products read a column-major
// copy of dy in float32 (layers/fc_dnnl.cpp).
const char* kWideFcModel = R"(name: wide_fc
inputs: {data: [24], label: []}
layers:
  - {name: fc1, type: fc, num_output: 4096}
  - {name: relu1, type: relu}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

TEST(Allocations, SteadyStateOnOneDnnAllocatesAlikeEachIterationAndKeepsNothing) {
  const std::vector<std::pair<std::string, ConfigNode>> models = {
      {"lenet", load_model(std::string(POSEIDON_SOURCE_DIR) + "/models/lenet.yaml", {})},
      {"cifar10_quick", load_model(std::string(POSEIDON_SOURCE_DIR) + "/models/cifar10_quick.yaml", {})},
      {"small_images", ConfigNode::parse(kSmallImagesModel, "small_images.yaml")},
      {"wide_fc", ConfigNode::parse(kWideFcModel, "wide_fc.yaml")}};
  for (Precision precision : {Precision::fp32, Precision::bf16})
    for (const auto& [name, model] : models) {
      const Counted counted = count_steady_state(model, true, 30, precision);
      for (size_t k = 0; k < counted.allocations.size(); ++k)
        EXPECT_EQ(counted.allocations[k], counted.allocations[0])
            << name << ", " << precision_name(precision) << ", iteration " << k;
      EXPECT_EQ(counted.bytes_kept, 0) << name << ", " << precision_name(precision);
    }
}

}  // namespace
}  // namespace poseidon
