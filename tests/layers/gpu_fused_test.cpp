// The GPU's fused epilogues (layers/conv.cu: cuDNN's fused convolution,
// bias and ReLU; layers/fc.cu: cuBLASLt's bias, ReLU and bias-gradient
// epilogues) repeat bit for bit: the same inputs through the same layer
// twice give the same output, input gradient and parameter gradients, in
// float32 and bf16, with and without a fused ReLU, as the deterministic mode
// promises. (Their values against the CPU's: gpu_match_test.cpp.) Without a
// GPU they skip and say why (or fail, where a GPU is expected:
// gpu_required.h).
#include <gtest/gtest.h>

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

// Everything a forward and a backward write, copied to the host.
std::vector<Tensor> run_once(Layer& layer, const Tensor& x, const Tensor& dy) {
  const Device gpu = Device::cuda(0);
  Tensor in = x.to(gpu), out(dy.shape(), gpu), out_grad = dy.to(gpu), in_grad(x.shape(), gpu);
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
  const std::vector<Tensor> first = run_once(*layer, x, dy), second = run_once(*layer, x, dy);
  for (size_t t = 0; t < first.size(); ++t)
    ASSERT_EQ(std::memcmp(first[t].data(), second[t].data(), first[t].bytes()), 0)
        << what << ": tensor " << t << " (output, input gradient, parameter gradients) differs between runs";
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

}  // namespace
}  // namespace poseidon::testing
