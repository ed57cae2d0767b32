// The GPU's fused epilogues (layers/conv.cu: cuDNN's fused convolution,
// bias and ReLU; layers/fc.cu: cuBLASLt's bias, ReLU and bias-gradient
// epilogues) repeat bit for bit: the same inputs through the same layer
// twice give the same output, input gradient and parameter gradients, in
// float32 and bf16, with and without a fused ReLU, as the deterministic mode
// promises; and a convolution ranked again in its backward keeps its output
// and its ReLU's mask. (Their values against the CPU's: gpu_match_test.cpp.) Without a
// GPU they skip and say why (or fail, where a GPU is expected:
// gpu_required.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "core/device_memory.h"
#include "core/precision.h"
#include "core/registry.h"
#include "core/relu_fusion.h"
#include "gpu_required.h"

namespace poseidon::testing {
namespace {

// Everything a forward and a backward write, copied to the host; the
// output blob holds `held` before the forward.
std::vector<Tensor> run_once(Layer& layer, const Tensor& x, const Tensor& dy, float held = 0.f) {
  const Device gpu = Device::cuda(0);
  Tensor in = x.to(gpu), out(dy.shape(), gpu), out_grad = dy.to(gpu), in_grad(x.shape(), gpu);
  out.fill(held);
  LayerIO io;
  io.in = {&in};
  io.out = {&out};
  io.out_grad = {&out_grad};
  io.in_grad = {&in_grad};
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, gpu};
  layer.forward(io, ctx);
  layer.backward(io, ctx);
  std::vector<Tensor> written = {out.to(Device{}), in_grad.to(Device{})};
  for (auto& p : layer.params()) written.push_back(p.grad.to(Device{}));
  return written;
}

// The same inputs give the same bits twice, and again where the output
// blob held NaNs before the forward: cuDNN's fused convolution takes the
// output as its z operand with weight 0, which must not read it.
void expect_repeats(const std::string& yaml, const Shape& input, Precision precision, bool relu) {
  const std::string what = yaml + (precision == Precision::bf16 ? " bf16" : " fp32") + (relu ? " relu" : "");
  const Device gpu = Device::cuda(0);
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "case"), gpu);
  if (relu) ASSERT_TRUE(dynamic_cast<ReluFusable&>(*layer).fuse_relu()) << what;
  layer->set_precision(precision);
  const Shape out_shape = layer->reshape({input})[0];
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto random = [&](const Shape& shape) {
    Tensor t(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = uni(rng);
    return t;
  };
  for (auto& p : layer->params()) {
    p.value = random(p.shape).to(gpu);
    p.grad = Tensor(p.shape, gpu);
  }
  const Tensor x = random(input), dy = random(out_shape);
  const std::vector<Tensor> first = run_once(*layer, x, dy), second = run_once(*layer, x, dy),
                            over_nan = run_once(*layer, x, dy, std::nanf(""));
  for (size_t t = 0; t < first.size(); ++t) {
    ASSERT_EQ(std::memcmp(first[t].data(), second[t].data(), first[t].bytes()), 0)
        << what << ": tensor " << t << " (output, input gradient, parameter gradients) differs between runs";
    ASSERT_EQ(std::memcmp(first[t].data(), over_nan[t].data(), first[t].bytes()), 0)
        << what << ": tensor " << t << " differs where the output blob held NaNs before the forward";
  }
}

TEST(CudaLayers, FusedEpiloguesRepeatBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (Precision precision : {Precision::fp32, Precision::bf16})
    for (bool relu : {false, true}) {
      expect_repeats("{name: c, type: conv, num_output: 16, kernel_size: 3, pad: 1}", {4, 8, 20, 20}, precision, relu);
      expect_repeats("{name: f, type: fc, num_output: 300}", {32, 500}, precision, relu);
      expect_repeats("{name: f, type: fc, num_output: 10, bias: false}", {8, 64}, precision, relu);
    }
}

// A convolution whose algorithms are ranked again in its backward (the
// determinism changed since its forward) in float32: the ranking runs
// forward on scratch, so the fused ReLU's mask still reads the forward's
// output, which stays as forward wrote it.
TEST(CudaLayers, ConvRankedAgainInBackwardKeepsItsOutputAndMask) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const Device gpu = Device::cuda(0);
  const Shape input{4, 8, 20, 20};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto random = [&](const Shape& shape) {
    Tensor t(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = uni(rng);
    return t;
  };
  const std::string yaml = "{name: c, type: conv, num_output: 16, kernel_size: 3, pad: 1}";
  std::vector<Tensor> values;
  Tensor x = random(input), dy;
  // Written by backward: the input gradient, weight and bias gradients; the
  // second run with the determinism flipped between forward and backward.
  std::vector<std::vector<Tensor>> runs;
  for (bool flip : {false, true}) {
    auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "case"), gpu);
    ASSERT_TRUE(dynamic_cast<ReluFusable&>(*layer).fuse_relu());
    const Shape out_shape = layer->reshape({input})[0];
    if (values.empty()) {
      for (auto& p : layer->params()) values.push_back(random(p.shape));
      values[1].fill(0.2f);  // a bias that moves many outputs across zero
      dy = random(out_shape);
    }
    for (size_t k = 0; k < layer->params().size(); ++k) {
      layer->params()[k].value = values[k].to(gpu);
      layer->params()[k].grad = Tensor(values[k].shape(), gpu);
    }
    Tensor in = x.to(gpu), out(out_shape, gpu), out_grad = dy.to(gpu), in_grad(input, gpu);
    LayerIO io;
    io.in = {&in};
    io.out = {&out};
    io.out_grad = {&out_grad};
    io.in_grad = {&in_grad};
    std::mt19937_64 layer_rng(1);
    RunContext ctx{Phase::train, &layer_rng, gpu};
    layer->forward(io, ctx);
    const Tensor forward_out = out.to(Device{});
    if (flip) device_memory::set_deterministic(gpu, false);
    layer->backward(io, ctx);
    if (flip) device_memory::set_deterministic(gpu, true);
    // Each layer ranks its own forward algorithms by time, so two runs may
    // pick different ones: the output is compared within a run.
    const Tensor backward_out = out.to(Device{});
    ASSERT_EQ(std::memcmp(forward_out.data(), backward_out.data(), forward_out.bytes()), 0)
        << "the output changed in a backward" << (flip ? " that ranked the algorithms again" : "");
    runs.push_back({in_grad.to(Device{}), layer->params()[0].grad.to(Device{}), layer->params()[1].grad.to(Device{})});
  }
  // Other algorithms sum in other orders: the gradients agree to float32's
  // rounding of sums of at most 8 * 9 * 4 * 400 terms, not bit for bit.
  for (size_t t = 0; t < runs[0].size(); ++t) {
    float worst = 0.f, largest = 0.f;
    for (int64_t i = 0; i < runs[0][t].numel(); ++i) {
      worst = std::max(worst, std::abs(runs[0][t][i] - runs[1][t][i]));
      largest = std::max(largest, std::abs(runs[0][t][i]));
    }
    EXPECT_LE(worst, 1e-4f * largest) << "tensor " << t << " (input gradient, weight and bias gradients)";
  }
}

}  // namespace
}  // namespace poseidon::testing
