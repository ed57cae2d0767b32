// Blobs of precision bf16 on the CPU (core/blob_types.h): convolutions and
// fc layers write bfloat16, the layers that move values and batch norm keep
// it, and the float32 layers (the loss, a layer's own `precision: fp32`) read float32
// copies, made only for them. A bf16 net's loss and gradients stay within
// bfloat16's error of the same net in float32, also where one bfloat16 blob
// feeds a bfloat16 and a float32 reader at once (their gradients must add),
// and its activations take about half the bytes. On a GPU the same net's
// blobs take the CPU's types and copies, and its step follows the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/device_info.h"
#include "core/net.h"
#include "gpu_required.h"
#include "net_fixtures.h"

namespace poseidon {
namespace {

using namespace testing;  // net_fixtures.h

// ||a - b|| / ||b||, both widened to float32.
double relative_error(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::f32), y = b.to(DType::f32);
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    norm += double(y[i]) * y[i];
  }
  return std::sqrt(diff / norm);
}

// Each layer's rounding of its operands and results moves a result by about
// u = 2^-8 normwise (tests/layers/bf16_check.h); through the few layers of
// these nets, forward and back, that adds up to a few u (measured up to
// 1.1e-2 at batch 16 on the fan-out net). Upstream of a max pooling it is
// more: where bfloat16 rounds a window's two largest values to one, the
// pooling routes that window's gradient to another element, which moves
// the gradients below it by up to 6.2e-2 here. A lost gradient share or a
// misread blob is off by its whole size.
constexpr double kNetTolerance = std::ldexp(1.0, -5);
constexpr double kBelowMaxPoolTolerance = std::ldexp(1.0, -3);

struct Pair {
  Net fp32, bf16;
  float loss32 = 0, loss16 = 0;
};

// The same net in both precisions, the same parameters and batch, one
// forward and backward each.
std::unique_ptr<Pair> run_pair(const std::string& text, bool fuse = false) {
  const ConfigNode model = ConfigNode::parse(text, "net.yaml");
  auto p = std::unique_ptr<Pair>(new Pair{Net(model, 16), Net(model, 16)});
  p->bf16.set_precision(Precision::bf16);
  if (fuse) p->fp32.fuse_relus(), p->bf16.fuse_relus();
  NullSink sink;
  for (Net* net : {&p->fp32, &p->bf16}) {
    net->init_params(3);
    feed(*net, 4);
    RunContext ctx;
    (net == &p->fp32 ? p->loss32 : p->loss16) = net->forward(ctx);
    net->backward(ctx, sink);
  }
  return p;
}

void expect_close_to_fp32(Pair& p, const std::vector<std::string>& blob_grads, double tolerance) {
  EXPECT_NEAR(p.loss16, p.loss32, kNetTolerance * std::abs(p.loss32));
  for (Param* param : p.fp32.params())
    EXPECT_LT(relative_error(p.bf16.find_param(param->name)->grad, param->grad), tolerance) << param->name;
  for (const std::string& b : blob_grads)
    EXPECT_LT(relative_error(p.bf16.blob(b).grad, p.fp32.blob(b).grad), tolerance) << b;
}

void expect_type(Net& net, const std::string& blob, DType type, bool f32_copy) {
  const Blob& b = net.blob(blob);
  EXPECT_EQ(b.value.dtype(), type) << blob;
  if (b.grad.defined() && !b.grad.empty()) EXPECT_EQ(b.grad.dtype(), type) << blob << " gradient";
  EXPECT_EQ(b.f32_value.defined(), f32_copy) << blob << ": float32 copy";
}

const char* kConvReluPoolFc = R"(name: small
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, kernel_size: 2, stride: 2}
  - {name: fc, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";

TEST(Bf16Blobs, ConvReluPoolFcLossMatchesFp32WithBf16Blobs) {
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "ReLU fused" : "ReLU apart");
    auto p = run_pair(kConvReluPoolFc, fuse);
    for (const char* b : {"conv1", "relu1", "pool1"}) expect_type(p->bf16, b, DType::bf16, false);
    // The loss reads float32: the fc's output has a copy, and only it.
    expect_type(p->bf16, "fc", DType::bf16, true);
    EXPECT_TRUE(p->bf16.blob("fc").f32_grad.defined());
    expect_type(p->bf16, "data", DType::f32, false);
    expect_type(p->bf16, "loss", DType::f32, false);
    for (const Blob& b : p->fp32.blobs()) expect_type(p->fp32, b.name, DType::f32, false);
    expect_close_to_fp32(*p, {"conv1", "relu1", "pool1", "fc"}, kBelowMaxPoolTolerance);
  }
}

// c1 feeds a ReLU and a 1x1 convolution (bfloat16 readers) and a pooling
// that keeps float32 by its own key (a reader of c1's float32 copy); c1's
// gradient is the sum of the three.
const char* kFanOut = R"(name: fanout
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: c1, type: conv, inputs: data, num_output: 6, kernel_size: 3, pad: 1}
  - {name: r1, type: relu, inputs: c1}
  - {name: c2, type: conv, inputs: r1, num_output: 4, kernel_size: 3}
  - {name: fa, type: fc, inputs: c2, num_output: 3}
  - {name: la, type: softmax_loss, inputs: [fa, label]}
  - {name: p1, type: pool, inputs: c1, kernel_size: 2, stride: 2, precision: fp32}
  - {name: fb, type: fc, inputs: p1, num_output: 3}
  - {name: lb, type: softmax_loss, inputs: [fb, label]}
  - {name: c3, type: conv, inputs: c1, num_output: 2, kernel_size: 1}
  - {name: fc3, type: fc, inputs: c3, num_output: 3}
  - {name: lc, type: softmax_loss, inputs: [fc3, label]}
)";

TEST(Bf16Blobs, FanOutIntoBf16AndFloat32ReadersMatchesFp32) {
  auto p = run_pair(kFanOut, true);
  EXPECT_EQ(p->bf16.blob("r1").shares, -1) << "c1 feeds three layers: the ReLU cannot fuse";
  expect_type(p->bf16, "c1", DType::bf16, true);
  EXPECT_TRUE(p->bf16.blob("c1").f32_grad.defined());
  expect_type(p->bf16, "r1", DType::bf16, false);
  expect_type(p->bf16, "c3", DType::bf16, false);
  expect_type(p->bf16, "p1", DType::f32, false);
  expect_type(p->bf16, "fb", DType::bf16, true);
  expect_close_to_fp32(*p, {"c1", "r1", "c3", "p1"}, kNetTolerance);

  // A second backward finds the first one's gradients in the blobs and in
  // c1's copy: each must start again, not add to them.
  const Tensor c1_grad = p->bf16.blob("c1").grad.to(DType::f32);
  Tensor c1_copy_grad(p->bf16.blob("c1").f32_grad.shape());
  c1_copy_grad.copy_from(p->bf16.blob("c1").f32_grad);
  Tensor first(c1_grad.shape());
  first.copy_from(c1_grad);
  NullSink sink;
  RunContext ctx;
  p->bf16.backward(ctx, sink);
  EXPECT_TRUE(same_values(p->bf16.blob("c1").grad.to(DType::f32), first));
  EXPECT_TRUE(same_values(p->bf16.blob("c1").f32_grad, c1_copy_grad));
}

// A residual block as ResNet's: batch norm reads and writes bfloat16 blobs
// (computing in float32 inside) and the residual sum with them, so under
// bf16 no blob but the logits has a float32 copy.
const char* kResidual = R"(name: residual
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: c0, type: conv, inputs: data, num_output: 8, kernel_size: 3, pad: 1, bias: false}
  - {name: b0, type: batch_norm, inputs: c0}
  - {name: r0, type: relu, inputs: b0}
  - {name: c1, type: conv, inputs: r0, num_output: 8, kernel_size: 3, pad: 1, bias: false}
  - {name: b1, type: batch_norm, inputs: c1}
  - {name: r1, type: relu, inputs: b1}
  - {name: c2, type: conv, inputs: r1, num_output: 8, kernel_size: 3, pad: 1, bias: false}
  - {name: b2, type: batch_norm, inputs: c2}
  - {name: add, type: sum, inputs: [b2, r0]}
  - {name: r2, type: relu, inputs: add}
  - {name: pool, type: pool, inputs: r2, mode: avg, global: true}
  - {name: fc, type: fc, inputs: pool, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";

// The residual net with its batch norms kept in float32 by their own key.
std::string with_float32_batch_norms(std::string text) {
  for (const char* layer : {"{name: b0,", "{name: b1,", "{name: b2,"})
    text.insert(text.find(layer) + 1, "precision: fp32, ");
  return text;
}

// Batch norm's input gradient takes dy less its means, which nearly cancel
// at initialisation, so the bf16 convolutions' roundings alone move the
// gradients below it by up to 12% here (measured with the batch norms in
// float32; more than kNetTolerance). Batch norm on bfloat16 blobs adds its
// own roundings of y and dx to that, a few bfloat16 steps through the net
// as elsewhere: each gradient stays within kNetTolerance of its error with
// float32 batch norms (measured: 0.013 more at most, b1's bias). A lost
// share or a misread blob is off by its whole size.
TEST(Bf16Blobs, ResidualBlockKeepsBatchNormAndTheSumOnBf16Blobs) {
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "ReLU fused" : "ReLU apart");
    auto p = run_pair(kResidual, fuse);
    auto kept = run_pair(with_float32_batch_norms(kResidual), fuse);
    for (const char* b : {"c0", "b0", "c1", "b1", "c2", "b2", "add", "pool"})
      expect_type(p->bf16, b, DType::bf16, false);
    expect_type(p->bf16, "fc", DType::bf16, true);
    expect_type(kept->bf16, "b0", DType::f32, false);
    expect_type(kept->bf16, "c0", DType::bf16, true);
    EXPECT_NEAR(p->loss16, p->loss32, kNetTolerance * std::abs(p->loss32));
    for (Param* param : p->fp32.params()) {
      if (!param->learnable) continue;
      const double error = relative_error(p->bf16.find_param(param->name)->grad, param->grad);
      const double kept_error =
          relative_error(kept->bf16.find_param(param->name)->grad, kept->fp32.find_param(param->name)->grad);
      EXPECT_LT(error, kept_error + kNetTolerance) << param->name << " (" << kept_error << " with float32 batch norms)";
    }
  }
}

// The fan-out net on the GPU beside the CPU, from the same parameters and
// batch: every blob has the CPU net's type, float32 copies and sharing (the
// GPU layers declare their CPU versions' types, and the Net casts at the
// float32 layers' edges on the device), and the loss and gradients follow
// the CPU's within bfloat16's error; a second backward starts afresh.
TEST(CudaBf16Blobs, GpuNetTakesTheCpuNetsTypesAndFollowsIt) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (const device_info::Gpu& g : device_info::visible_gpus())
    if (g.index == 0 && g.compute_major < 8) GTEST_SKIP() << "cuda:0 has no bfloat16 math";
  const Device gpu_device = Device::cuda(0);
  const ConfigNode model = ConfigNode::parse(kFanOut, "net.yaml");
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "ReLUs fused" : "ReLUs apart");
    Net cpu(model, 16), gpu(model, 16, gpu_device);
    for (Net* net : {&cpu, &gpu}) {
      net->set_precision(Precision::bf16);
      if (fuse) net->fuse_relus();
      net->init_params(3);
    }
    for (Param* p : cpu.params()) gpu.find_param(p->name)->value.copy_from(p->value);
    feed(cpu, 4);
    for (const std::string& in : cpu.input_names()) gpu.blob(in).value.copy_from(cpu.blob(in).value);
    NullSink sink;
    RunContext cpu_ctx;
    RunContext gpu_ctx{Phase::train, nullptr, gpu_device};
    const float cpu_loss = cpu.forward(cpu_ctx);
    cpu.backward(cpu_ctx, sink);
    const float gpu_loss = gpu.forward(gpu_ctx);
    gpu.backward(gpu_ctx, sink);
    for (const Blob& b : cpu.blobs()) {
      const Blob& g = gpu.blob(b.name);
      EXPECT_EQ(g.value.dtype(), b.value.dtype()) << b.name;
      EXPECT_EQ(g.grad.defined() && !g.grad.empty(), b.grad.defined() && !b.grad.empty()) << b.name;
      if (b.grad.defined() && !b.grad.empty()) EXPECT_EQ(g.grad.dtype(), b.grad.dtype()) << b.name;
      EXPECT_EQ(g.f32_value.defined(), b.f32_value.defined()) << b.name;
      EXPECT_EQ(g.f32_grad.defined(), b.f32_grad.defined()) << b.name;
      EXPECT_EQ(g.shares, b.shares) << b.name;
    }
    EXPECT_EQ(gpu.blob("c1").value.dtype(), DType::bf16);
    EXPECT_TRUE(gpu.blob("c1").f32_grad.defined()) << "c1 feeds a float32 pooling";
    EXPECT_NEAR(gpu_loss, cpu_loss, kNetTolerance * std::abs(cpu_loss));
    for (Param* param : cpu.params())
      EXPECT_LT(relative_error(gpu.find_param(param->name)->grad.to(Device{}), param->grad), kNetTolerance)
          << param->name;
    for (const char* b : {"c1", "r1", "c3", "p1"})
      EXPECT_LT(relative_error(gpu.blob(b).grad.to(Device{}), cpu.blob(b).grad), kNetTolerance) << b;
    const Tensor first = gpu.blob("c1").grad.to(Device{});
    gpu.backward(gpu_ctx, sink);
    EXPECT_TRUE(same_values(gpu.blob("c1").grad.to(Device{}), first)) << "a second backward added to the first";
  }
}

// A VGG-like stack, ReLUs fused as training fuses them: under bf16 every
// activation and its gradient is bfloat16 but the logits (the loss reads a
// float32 copy of them), so the blobs take just over half the bytes.
TEST(Bf16Blobs, VggLikeNetsBlobBytesHalve) {
  const ConfigNode model = ConfigNode::parse(R"(name: vgg_like
inputs: {data: [3, 32, 32], label: []}
layers:
  - {name: conv1_1, type: conv, num_output: 16, kernel_size: 3, pad: 1}
  - {name: relu1_1, type: relu}
  - {name: conv1_2, type: conv, num_output: 16, kernel_size: 3, pad: 1}
  - {name: relu1_2, type: relu}
  - {name: pool1, type: pool, kernel_size: 2, stride: 2}
  - {name: conv2_1, type: conv, num_output: 32, kernel_size: 3, pad: 1}
  - {name: relu2_1, type: relu}
  - {name: pool2, type: pool, kernel_size: 2, stride: 2}
  - {name: fc6, type: fc, num_output: 64}
  - {name: relu6, type: relu}
  - {name: drop6, type: dropout}
  - {name: fc7, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc7, label]}
)",
                                             "vgg_like.yaml");
  Net fp32(model, 8), bf16(model, 8);
  bf16.set_precision(Precision::bf16);
  fp32.fuse_relus();
  bf16.fuse_relus();
  const double ratio = double(bf16.blob_bytes()) / double(fp32.blob_bytes());
  EXPECT_LT(ratio, 0.52) << bf16.blob_bytes() << " of " << fp32.blob_bytes() << " bytes";
  EXPECT_GT(ratio, 0.5) << "the net inputs and the loss stay float32";
}

}  // namespace
}  // namespace poseidon
