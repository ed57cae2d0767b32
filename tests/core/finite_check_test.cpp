// The numeric guard. Finite checks over raw buffers and over a Net's
// gradients; then `poseidon train`, driven in-process, with a NaN injected
// into one layer's gradient at a chosen iteration: the run stops with exit
// status 2 and a message naming the iteration, the layer and the tensor, no
// parameter takes that iteration's update nor buffer its forward's running
// statistics, and the checkpoint of the state before it resumes to the
// numbers of a run that never failed. An fc layer proves its gradients
// finite from its operands where it can, and only there.
// The injecting layer is registered in this test binary only: the tools
// tests require every registered layer type to be documented.
#include "core/finite_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/bf16.h"
#include "core/registry.h"
#include "core/safetensors.h"
#include "gpu_required.h"
#include "tools/cli/app.h"

namespace poseidon {
namespace {

namespace fs = std::filesystem;

// Identity on its input, with a 4-element weight that forward ignores; its
// backward call number `nan_at` (1-based, 0: never) writes NaN into element 2
// of the weight's gradient.
class NanGradientLayer : public Layer {
 public:
  explicit NanGradientLayer(const ConfigNode& c) : Layer(c), nan_at_(c.get_int("nan_at", 0)) {}

  std::vector<Shape> reshape(const std::vector<Shape>& in) override {
    declare_param("weight", {4}, ParamInit{});
    return {in[0]};
  }
  void forward(LayerIO& io, RunContext&) override { io.out[0]->copy_from(*io.in[0]); }
  void backward(LayerIO& io, RunContext&) override {
    if (Tensor* dx = io.in_grad[0])
      for (int64_t i = 0; i < dx->numel(); ++i) (*dx)[i] += (*io.out_grad[0])[i];
    Tensor& grad = param(0).grad;
    grad.zero();
    if (++calls_ == nan_at_) grad[2] = std::numeric_limits<float>::quiet_NaN();
  }

 private:
  int64_t nan_at_, calls_ = 0;
};

POSEIDON_REGISTER_LAYER(NanGradientLayer, "nan_gradient", "test only: identity that poisons its weight gradient once",
                        {{"nan_at", "int", "0", "backward call whose weight gradient gets a NaN (0: never)"}});

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(FiniteCheck, FindsTheFirstNanOrInfinityAtAnySize) {
  // The largest size is checked by the parallel reduction.
  for (int64_t n : {1, 7, 64, 1000, (1 << 18) + 5}) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = (i % 2 ? -1.f : 1.f) * std::numeric_limits<float>::max() / float(i + 1);
    v[0] = -0.f;
    if (n > 1) v[1] = std::numeric_limits<float>::denorm_min();
    EXPECT_TRUE(all_finite(v.data(), n)) << n;
    EXPECT_EQ(first_non_finite(v.data(), n), -1) << n;
    for (float bad : {kNan, kInf, -kInf}) {
      std::vector<float> w = v;
      w[n - 1] = bad;
      if (n > 3) w[n / 2] = bad;
      EXPECT_FALSE(all_finite(w.data(), n)) << n << " " << bad;
      EXPECT_EQ(first_non_finite(w.data(), n), n > 3 ? n / 2 : n - 1) << n << " " << bad;
    }
  }
  EXPECT_TRUE(all_finite(nullptr, 0));
}

TEST(FiniteCheck, MaxAbsSeesEveryMagnitudeAndTurnsNanOnANonFiniteValue) {
  for (int64_t n : {1, 7, 1000, (1 << 18) + 5}) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = (i % 2 ? -1.f : 1.f) * float(i % 100);
    v[n / 2] = -1e30f;
    EXPECT_EQ(max_abs(v.data(), n), 1e30f) << n;
    for (float bad : {kNan, kInf, -kInf}) {
      std::vector<float> w = v;
      w[n - 1] = bad;
      EXPECT_TRUE(std::isnan(max_abs(w.data(), n))) << n << " " << bad;
    }
  }
  EXPECT_EQ(max_abs(nullptr, 0), 0.f);
}

// The same over bfloat16 bits (a bf16 blob read in place).
TEST(FiniteCheck, MaxAbsOfBf16BitsSeesEveryMagnitudeAndTurnsNanOnANonFiniteValue) {
  for (int64_t n : {1, 7, 1000, (1 << 18) + 5}) {
    std::vector<uint16_t> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = to_bf16((i % 2 ? -1.f : 1.f) * float(i % 100));
    v[n / 2] = to_bf16(-1e30f);
    EXPECT_EQ(max_abs_bf16(v.data(), n), from_bf16(to_bf16(1e30f))) << n;
    for (float bad : {kNan, kInf, -kInf}) {
      std::vector<uint16_t> w = v;
      w[n - 1] = to_bf16(bad);
      EXPECT_TRUE(std::isnan(max_abs_bf16(w.data(), n))) << n << " " << bad;
    }
  }
  EXPECT_EQ(max_abs_bf16(nullptr, 0), 0.f);
}

TEST(FiniteCheck, ProductSumBoundHoldsOnlyWellInsideTheRange) {
  const float big = std::numeric_limits<float>::max();
  EXPECT_TRUE(product_sums_finite(1.f, 1.f, 1000));
  EXPECT_TRUE(product_sums_finite(1e18f, 1e18f, 10));
  EXPECT_FALSE(product_sums_finite(1e19f, 1e19f, 1));  // 1e38: over an eighth of the range
  EXPECT_TRUE(product_sums_finite(1e-30f, 1e30f, 1));
  EXPECT_FALSE(product_sums_finite(big / 2, 1e-30f, 1));  // the factor alone could round to infinity
  EXPECT_FALSE(product_sums_finite(1.f, 1.f, int64_t(1) << 22));  // too many roundings to bound
  for (float bad : {kNan, kInf}) {
    EXPECT_FALSE(product_sums_finite(bad, 1.f, 1));
    EXPECT_FALSE(product_sums_finite(1.f, bad, 1));
  }
}

const char* kFcModel = R"(name: fc_only
inputs: {data: [2], label: []}
layers:
  - {name: fc, type: fc, inputs: data, num_output: 2}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";

// The fc layer's backward alone over a batch of two, with every element of x
// and of dy set (the loss only puts the layer on backward's path).
void fc_backward(Net& net, float x, float dy) {
  RunContext ctx{Phase::train, nullptr, Device{}};
  net.blob("data").value.fill(x);
  net.forward_layer(0, ctx);
  net.blob("fc").grad.fill(dy);
  net.backward_layer(0, ctx);
}

TEST(FiniteCheck, FcProvesItsGradientsFiniteOnlyWhereItsOperandsBoundThem) {
  Net net(ConfigNode::parse(kFcModel, "model.yaml"), 2);
  net.init_params(1);
  Param& w = *net.find_param("fc.weight");
  Param& b = *net.find_param("fc.bias");
  fc_backward(net, 1.f, 1.f);
  EXPECT_TRUE(w.grad_bounded);
  EXPECT_TRUE(b.grad_bounded);
  EXPECT_FALSE(find_non_finite_gradient(net));
  // Each product 2e38 x 1 is finite; their sum over the batch is not.
  fc_backward(net, 2e38f, 1.f);
  EXPECT_FALSE(w.grad_bounded);
  EXPECT_TRUE(b.grad_bounded);
  EXPECT_TRUE(std::isinf(w.grad[0]));
  auto bad = find_non_finite_gradient(net);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, "fc.weight");
  fc_backward(net, 1.f, kNan);
  EXPECT_FALSE(w.grad_bounded);
  EXPECT_FALSE(b.grad_bounded);
  bad = find_non_finite_gradient(net);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, "fc.weight");
  // Proven again by the next backward with ordinary operands.
  fc_backward(net, -3.f, 0.5f);
  EXPECT_TRUE(w.grad_bounded);
  EXPECT_FALSE(find_non_finite_gradient(net));
}

const char* kModel = R"(name: guarded
inputs: {data: [2, 5, 5], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 3, kernel_size: 3}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: fc1, type: fc, num_output: 6}
  - {name: inject, type: nan_gradient, nan_at: 5}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

TEST(FiniteCheck, NamesTheBadGradientNearestTheLoss) {
  Net net(ConfigNode::parse(kModel, "model.yaml"), 2);
  EXPECT_FALSE(find_non_finite_gradient(net));
  net.find_param("conv1.weight")->grad[0] = kNan;
  net.find_param("fc2.weight")->grad[7] = -kInf;
  auto bad = find_non_finite_gradient(net);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->describe("non-finite gradient"),
            "non-finite gradient in layer 'fc2', tensor 'fc2.weight' (first at index 7: -inf)");
  net.find_param("fc2.weight")->grad[7] = 0.f;
  bad = find_non_finite_gradient(net);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->tensor, "conv1.weight");
  EXPECT_EQ(bad->layer, "conv1");
  EXPECT_TRUE(std::isnan(bad->value));

  EXPECT_FALSE(find_non_finite_value(net));
  net.find_param("fc1.bias")->value[3] = kInf;
  bad = find_non_finite_value(net);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->describe("x"), "x in layer 'fc1', tensor 'fc1.bias' (first at index 3: inf)");
}

TEST(FiniteCheck, ReadsEveryGradientALayerDidNotProveFinite) {
  Net net(ConfigNode::parse(kModel, "model.yaml"), 2);
  Param& proven = *net.find_param("fc1.weight");
  proven.grad_bounded = true;  // as fc1's backward sets it
  proven.grad[1] = kNan;       // so the check trusts it and does not read it
  EXPECT_FALSE(find_non_finite_gradient(net));
  proven.grad[1] = 0.f;  // the naming scan reads everything
  // Before, right after and well after the proven gradient in the buffer.
  for (const char* name : {"conv1.weight", "bn1.bias", "fc1.bias", "inject.weight", "fc2.bias"}) {
    Param& p = *net.find_param(name);
    p.grad[p.grad.numel() - 1] = kInf;
    auto bad = find_non_finite_gradient(net);
    ASSERT_TRUE(bad) << name;
    EXPECT_EQ(bad->tensor, name);
    p.grad[p.grad.numel() - 1] = 0.f;
  }
}

// A non-finite loss is traced to the first layer, in forward order, whose
// output turned non-finite, or to the net input that already was; the same
// on the GPU (CudaFiniteCheck below) as on the CPU.
void expect_first_non_finite_output_named(const Device& device) {
  const char* model = R"(name: traced
inputs: {data: [2, 5, 5], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 3, kernel_size: 3}
  - {name: relu1, type: relu}
  - {name: fc1, type: fc, num_output: 6}
  - {name: relu2, type: relu}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";
  Net net(ConfigNode::parse(model, "model.yaml"), 2, device);
  net.init_params(3);
  Tensor data({2, 2, 5, 5}), label({2});
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = float(i % 7) - 3.f;
  label[1] = 2.f;
  net.blob("data").value.copy_from(data);
  net.blob("label").value.copy_from(label);
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, device};
  ASSERT_TRUE(std::isfinite(net.forward(ctx)));
  EXPECT_FALSE(find_non_finite_output(net));

  // An infinite bias of fc1 makes fc1's output infinite, then every later one.
  Param& bias = *net.find_param("fc1.bias");
  Tensor poisoned = bias.value.to(Device{});
  poisoned[4] = kInf;
  bias.value.copy_from(poisoned);
  float loss = net.forward(ctx);
  ASSERT_FALSE(std::isfinite(loss));
  EXPECT_EQ(describe_non_finite_loss(loss, net), "non-finite loss (" + non_finite_text(loss) +
                                                     "), first in the output of layer 'fc1' (blob 'fc1', first at "
                                                     "index 4: inf)");
  // Earlier in the net, the earlier layer is named: conv1's output is NaN
  // from a NaN weight however relu1 treats it.
  Param& weight = *net.find_param("conv1.weight");
  poisoned = weight.value.to(Device{});
  poisoned[0] = kNan;
  weight.value.copy_from(poisoned);
  net.forward(ctx);
  auto bad = find_non_finite_output(net);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->layer, "conv1");
  EXPECT_EQ(bad->tensor, "conv1");
  EXPECT_EQ(bad->index, 0);
  EXPECT_TRUE(std::isnan(bad->value));

  data[13] = -kInf;
  net.blob("data").value.copy_from(data);
  loss = net.forward(ctx);
  EXPECT_EQ(describe_non_finite_loss(loss, net), "non-finite loss (" + non_finite_text(loss) +
                                                     "), first in the input 'data' (first at index 13: -inf)");
}

TEST(FiniteCheck, NamesTheFirstLayerWhoseOutputTurnedNonFinite) { expect_first_non_finite_output_named(Device{}); }

TEST(CudaFiniteCheck, NamesTheFirstLayerWhoseOutputTurnedNonFiniteAsTheCpuDoes) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_first_non_finite_output_named(Device::cuda(0));
}

class NumericGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "numeric_guard_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ / "model.yaml") << kModel;
    // 24 examples in batches of 4: iteration 5 is in epoch 0.
    std::ofstream(dir_ / "config.yaml")
        << "model: model.yaml\nseed: 4\nthreads: 1\n"
           "data: {train: {source: synthetic, shape: [2, 5, 5], num_classes: 3, size: 24, batch_size: 4, "
           "workers: 1}}\n"
           "solver: {lr: 0.1, momentum: 0.9, weight_decay: 0.001, max_iter: 8}\n"
           "train: {display: 0}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `poseidon train config.yaml --quiet <args>` in-process; returns the
  // exit status and keeps stderr in err_.
  int train(std::vector<std::string> args) {
    args.insert(args.begin(), {"poseidon", "train", (dir_ / "config.yaml").string(), "--quiet"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    ::testing::internal::CaptureStderr();
    int status = run_cli(static_cast<int>(argv.size()), argv.data());
    err_ = ::testing::internal::GetCapturedStderr();
    return status;
  }
  std::string out(const std::string& name) { return "train.output_dir=" + (dir_ / name).string(); }
  std::string file(const std::string& name) { return (dir_ / name).string(); }

  fs::path dir_;
  std::string err_;
};

void expect_same_checkpoint(const std::string& a_path, const std::string& b_path) {
  SafetensorsFile a = read_safetensors(a_path), b = read_safetensors(b_path);
  EXPECT_EQ(a.metadata, b.metadata);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, ta] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    const SafetensorsTensor& tb = b.tensors.at(name);
    ASSERT_EQ(ta.shape, tb.shape) << name;
    EXPECT_EQ(0, std::memcmp(ta.data.data(), tb.data.data(), ta.data.size() * sizeof(float))) << name << " differs";
  }
}

TEST_F(NumericGuard, NanGradientStopsWithStatus2NamingIterationLayerAndTensor) {
  EXPECT_EQ(train({"--set", out("a")}), 2) << err_;
  EXPECT_NE(err_.find("iteration 5 (epoch 0): non-finite gradient in layer 'inject', tensor 'inject.weight' "
                      "(first at index 2: nan)"),
            std::string::npos)
      << err_;
  EXPECT_NE(err_.find(file("a/iter_4.safetensors")), std::string::npos) << err_;
  EXPECT_FALSE(fs::exists(file("a/final.safetensors")));
}

TEST_F(NumericGuard, StateBeforeTheFailureResumesToTheNumbersOfARunThatNeverFailed) {
  ASSERT_EQ(train({"--set", out("a")}), 2) << err_;
  ASSERT_EQ(train({"--set", out("b"), "--set", "net.layers.inject.nan_at=0", "--set", "train.snapshot_interval=4"}), 0)
      << err_;
  // Parameters, solver state, buffers, loader position and RNG state are
  // those after iteration 4: no layer kept an update from iteration 5, not
  // even those whose gradients backward reported before reaching the
  // poisoned one, and bn1's running statistics are not those of its forward.
  expect_same_checkpoint(file("a/iter_4.safetensors"), file("b/iter_4.safetensors"));

  ASSERT_EQ(train({"--set", out("c"), "--set", "net.layers.inject.nan_at=0", "--resume", file("a/iter_4.safetensors")}),
            0)
      << err_;
  expect_same_checkpoint(file("c/final.safetensors"), file("b/final.safetensors"));
}

TEST_F(NumericGuard, CheckFiniteFalseLetsTheNanIntoTheParameters) {
  ASSERT_EQ(train({"--set", out("a"), "--set", "solver.check_finite=false"}), 0) << err_;
  SafetensorsFile f = read_safetensors(file("a/final.safetensors"));
  EXPECT_TRUE(std::isnan(f.tensors.at("inject.weight").data[2]));
}

}  // namespace
}  // namespace poseidon
