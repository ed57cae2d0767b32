// The fan-out nets of tests/torch/fanout_reference.py (conv c1's output feeds
// a ReLU, a max pooling or a dropout and also a second convolution) on the
// GPU against the CPU, in float32 and in bf16: one forward and backward from
// the same parameters, data and RNG (so dropout drops the same elements),
// and the loss, every parameter gradient and c1's output gradient must
// agree, after a second backward over the first one's gradients. The CPU
// side is checked against PyTorch (tests/tools/
// torch_fanout_test.cpp), so a GPU layer that overwrote its input gradient
// instead of adding to it, dropping the other branch's share (tens of
// percent of c1's gradient), fails here.
// Tolerances, normwise: float32 1e-4 (gpu_match_test's: summation order
// only); bf16 2^-5, room for bfloat16 result roundings (2^-9 each, cuDNN's
// conv outputs and gradients) through the net's three product layers
// forward and back, still far below a lost branch.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/net.h"
#include "core/precision.h"
#include "gpu_required.h"

namespace poseidon::testing {
namespace {

std::string fanout_model(const std::string& branch) {
  const std::string layer = branch == "relu"   ? "{name: b, type: relu, inputs: c1}"
                            : branch == "pool" ? "{name: b, type: pool, inputs: c1, kernel_size: 2}"
                                               : "{name: b, type: dropout, inputs: c1, ratio: 0.5}";
  const std::string c2 = branch == "pool" ? "kernel_size: 2, stride: 2" : "kernel_size: 1";
  return "name: fanout_" + branch + R"(
inputs: {data: [3, 6, 6], label: []}
layers:
  - {name: c1, type: conv, inputs: data, num_output: 4, kernel_size: 3, pad: 1}
  - )" + layer + R"(
  - {name: c2, type: conv, inputs: c1, num_output: 4, )" +
         c2 + R"(}
  - {name: s, type: sum, inputs: [b, c2]}
  - {name: fc, type: fc, inputs: s, num_output: 5}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";
}

class NoUpdate : public GradSink {
 public:
  void grad_ready(Param&) override {}
};

double norm_relative_error(const Tensor& got, const Tensor& want) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    ref += double(want[i]) * want[i];
  }
  return std::sqrt(diff / std::max(ref, 1e-30));
}

struct Outcome {
  float loss = 0;
  std::vector<std::pair<std::string, Tensor>> grads;  // on the host: c1's output gradient, then each parameter's
};

Outcome run(const std::string& branch, Precision precision, const Device& device) {
  Net net(ConfigNode::parse(fanout_model(branch), "fanout.yaml"), 4, device);
  net.set_precision(precision);
  Net reference(ConfigNode::parse(fanout_model(branch), "fanout.yaml"), 4);
  reference.init_params(5);
  net.flat_values().copy_from(reference.flat_values());
  Tensor data(net.blob("data").value.shape()), label(net.blob("label").value.shape());
  std::mt19937_64 draw(8);
  std::normal_distribution<float> normal;
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = normal(draw);
  for (int64_t i = 0; i < label.numel(); ++i) label[i] = float(i * 3 % 5);
  net.blob("data").value.copy_from(data);
  net.blob("label").value.copy_from(label);
  std::mt19937_64 rng(11);
  RunContext ctx{Phase::train, &rng, device};
  NoUpdate sink;
  Outcome out;
  out.loss = net.forward(ctx);
  // Twice: the second backward finds the first one's gradients in the blobs,
  // which a first writer that overwrites (conv and fc) must not add to.
  net.backward(ctx, sink);
  net.backward(ctx, sink);
  // Widened: under bf16 the blob is bfloat16 on either device.
  out.grads.emplace_back("c1 output gradient", net.blob("c1").grad.to(Device{}).to(DType::f32));
  for (Param* p : net.params()) out.grads.emplace_back(p->name + " gradient", p->grad.to(Device{}));
  return out;
}

TEST(FanOutNets, GpuMatchesCpuInFloat32AndBf16) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (const char* branch : {"relu", "pool", "dropout"})
    for (Precision precision : {Precision::fp32, Precision::bf16}) {
      SCOPED_TRACE(std::string(branch) + " " + precision_name(precision));
      const double tolerance = precision == Precision::bf16 ? 1.0 / 32 : 1e-4;
      const Outcome cpu = run(branch, precision, Device{});
      const Outcome gpu = run(branch, precision, Device::cuda(0));
      EXPECT_NEAR(gpu.loss, cpu.loss, tolerance * std::abs(cpu.loss));
      ASSERT_EQ(gpu.grads.size(), cpu.grads.size());
      for (size_t k = 0; k < cpu.grads.size(); ++k)
        EXPECT_LE(norm_relative_error(gpu.grads[k].second, cpu.grads[k].second), tolerance) << cpu.grads[k].first;
    }
}

}  // namespace
}  // namespace poseidon::testing
