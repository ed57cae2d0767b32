// Layers on bfloat16 blobs on the GPU against the same layers on the CPU
// (core/blob_types.h). ReLU, max and average pooling, dropout, flatten,
// concat and sum write the CPU's bits, forward and backward (their float32
// results rounded once: bf16_blob_layers_test.cpp), adding into an input
// gradient that holds values. Convolution and fc read bfloat16 inputs and
// output gradients as they are and write bfloat16 outputs and input
// gradients, adding into one or overwriting it as the Net says, with and
// without a fused ReLU, and batch norm reads and writes them computing in
// float32, within two bfloat16 roundings of the CPU's (each
// side rounds its own float32 result; cuDNN rounds the product before the
// bias is added) and the weight gradient within the float32 sums' noise
// (plus cuDNN's bfloat16 result for conv). Every GPU layer declares the
// blob types of its CPU version (this part runs without a GPU).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "core/bf16.h"
#include "core/blob_types.h"
#include "core/device_info.h"
#include "core/registry.h"
#include "core/relu_fusion.h"
#include "gpu_required.h"

namespace poseidon::testing {
namespace {

// GPU 0 multiplies in bfloat16 (compute capability 8.0 or later).
bool gpu_has_bf16_math() {
  for (const device_info::Gpu& gpu : device_info::visible_gpus())
    if (gpu.index == 0) return gpu.compute_major >= 8;
  return false;
}

// A copy of host tensor `t` on `device` in `type`, with storage of its own
// (the runs add into their input gradients).
Tensor copy_as(const Tensor& t, const Device& device, DType type) {
  Tensor c(t.shape(), device, type);
  c.copy_from(t.to(type).to(device));
  return c;
}

// What one forward and backward reads: inputs, their gradients to add into
// (or overwrite), the output gradient, the parameters.
struct Inputs {
  std::vector<Tensor> x, dx;
  Tensor dy;
  std::vector<Tensor> params;
};

// What it wrote, on the host in the blobs' type; parameter gradients float32.
struct Outputs {
  Tensor y;
  std::vector<Tensor> dx, grads;
};

struct Options {
  Precision precision = Precision::fp32;
  bool fuse_relu = false;
  bool overwrite_dx = false;  // the Net's first writer of each input gradient
};

Inputs draw(const std::string& yaml, const std::vector<Shape>& in, uint64_t seed) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"));
  const Shape out = layer->reshape(in)[0];
  std::mt19937_64 rng(seed);
  Inputs r;
  for (const Shape& s : in) r.x.push_back(bf16_exact(s, rng)), r.dx.push_back(bf16_exact(s, rng));
  r.dy = bf16_exact(out, rng);
  for (const Param& p : layer->params()) r.params.push_back(bf16_exact(p.shape, rng));
  return r;
}

Outputs run(const std::string& yaml, const Inputs& in, const Device& device, const Options& o) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"), device);
  layer->set_precision(o.precision);
  if (o.fuse_relu) {
    EXPECT_TRUE(dynamic_cast<ReluFusable&>(*layer).fuse_relu()) << yaml;
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : in.x) shapes.push_back(t.shape());
  const Shape out = layer->reshape(shapes)[0];
  for (size_t k = 0; k < in.params.size(); ++k) {
    layer->param(k).value = copy_as(in.params[k], device, DType::f32);
    layer->param(k).grad = Tensor(layer->param(k).shape, device);
  }
  std::vector<Tensor> x, dx;
  for (size_t k = 0; k < in.x.size(); ++k) {
    x.push_back(copy_as(in.x[k], device, DType::bf16));
    dx.push_back(copy_as(in.dx[k], device, DType::bf16));
  }
  Tensor y(out, device, DType::bf16), dy = copy_as(in.dy, device, DType::bf16);
  LayerIO io;
  for (size_t k = 0; k < x.size(); ++k) io.in.push_back(&x[k]), io.in_grad.push_back(&dx[k]);
  io.out = {&y};
  io.out_grad = {&dy};
  if (o.overwrite_dx) io.in_grad_unset.assign(x.size(), layer->writes_input_grads());
  std::mt19937_64 rng(5);  // dropout's seed: the same draw on both devices
  RunContext ctx{Phase::train, &rng, device};
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  Outputs r{y.to(Device{}), {}, {}};
  for (const Tensor& t : dx) r.dx.push_back(t.to(Device{}));
  for (const Param& p : layer->params()) r.grads.push_back(p.grad.to(Device{}));
  return r;
}

void expect_same_bits(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.dtype(), DType::bf16) << what;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < cpu.numel(); ++i)
    if (gpu.bf16_data()[i] != cpu.bf16_data()[i] && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << cpu.numel() << " differ, first at " << first;
}

void expect_gpu_moves_as_the_cpu(const std::string& yaml, const std::vector<Shape>& in) {
  SCOPED_TRACE(yaml);
  const Inputs inputs = draw(yaml, in, 17);
  const Outputs cpu = run(yaml, inputs, Device{}, {});
  const Outputs gpu = run(yaml, inputs, Device::cuda(0), {});
  expect_same_bits(gpu.y, cpu.y, "output");
  for (size_t k = 0; k < cpu.dx.size(); ++k) expect_same_bits(gpu.dx[k], cpu.dx[k], "input gradient");
}

TEST(GpuBf16Blobs, ReluWritesTheCpusBits) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_gpu_moves_as_the_cpu("{name: r, type: relu}", {{2, 3, 37, 41}});
}

TEST(GpuBf16Blobs, PoolingWritesTheCpusBits) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_gpu_moves_as_the_cpu("{name: p, type: pool, kernel_size: 3, stride: 2, pad: 1}", {{2, 3, 9, 11}});
  expect_gpu_moves_as_the_cpu("{name: p, type: pool, mode: avg, kernel_size: 3, stride: 2}", {{2, 3, 9, 11}});
  expect_gpu_moves_as_the_cpu("{name: p, type: pool, mode: avg, global: true}", {{2, 5, 6, 6}});
}

TEST(GpuBf16Blobs, DropoutWritesTheCpusBits) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_gpu_moves_as_the_cpu("{name: d, type: dropout, ratio: 0.3}", {{4, 333}});
}

TEST(GpuBf16Blobs, FlattenConcatAndSumWriteTheCpusBits) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_gpu_moves_as_the_cpu("{name: f, type: flatten}", {{2, 3, 4, 5}});
  expect_gpu_moves_as_the_cpu("{name: c, type: concat}", {{2, 3, 4, 5}, {2, 2, 4, 5}, {2, 1, 4, 5}});
  expect_gpu_moves_as_the_cpu("{name: s, type: sum, coefficients: [1, -0.5, 3]}",
                              {{2, 3, 17, 19}, {2, 3, 17, 19}, {2, 3, 17, 19}});
}

// Two bfloat16 results rounded each from its own float32 sum (and on the
// GPU's conv from cuDNN's rounded product plus the bias) land at most one
// bfloat16 step apart, 2^-8 of the value; the float32 sums themselves
// differ by about kSameOperands (gpu_bf16_test.cpp).
constexpr double kSameOperands = 1e-4;
constexpr double kTwoRoundings = 1.0 / 256;
constexpr double kCudnnRounding = 1.0 / 512;

// For the layers that compute: convolution, fc and batch norm.
void expect_computed_as_the_cpu(const std::string& yaml, const Shape& in, const Options& o) {
  SCOPED_TRACE(yaml + (o.fuse_relu ? " relu fused" : "") + (o.overwrite_dx ? " dx overwritten" : " dx added to"));
  const bool conv = yaml.find("type: conv") != std::string::npos;
  const Inputs inputs = draw(yaml, {in}, 23);
  const Outputs cpu = run(yaml, inputs, Device{}, o);
  const Outputs gpu = run(yaml, inputs, Device::cuda(0), o);
  ASSERT_EQ(gpu.y.dtype(), DType::bf16);
  ASSERT_EQ(gpu.dx[0].dtype(), DType::bf16);
  EXPECT_LE(norm_relative_error(gpu.y.to(DType::f32), cpu.y.to(DType::f32)), kSameOperands + kTwoRoundings) << "output";
  EXPECT_LE(norm_relative_error(gpu.dx[0].to(DType::f32), cpu.dx[0].to(DType::f32)), kSameOperands + kTwoRoundings)
      << "input gradient";
  EXPECT_LE(norm_relative_error(gpu.grads[0], cpu.grads[0]), kSameOperands + (conv ? kCudnnRounding : 0.0))
      << "weight gradient";
  if (gpu.grads.size() > 1) {
    EXPECT_LE(norm_relative_error(gpu.grads[1], cpu.grads[1]), kSameOperands) << "bias";
  }
  // Added to or overwritten: the gradient that was there is in it, or not,
  // which moves it by several times the tolerance above.
  const Outputs other = run(yaml, inputs, Device{}, {o.precision, o.fuse_relu, !o.overwrite_dx});
  EXPECT_GT(norm_relative_error(gpu.dx[0].to(DType::f32), other.dx[0].to(DType::f32)), 4 * kTwoRoundings)
      << "the input gradient was " << (o.overwrite_dx ? "added to" : "overwritten");
}

TEST(GpuBf16Blobs, ConvAndFcReadAndWriteBfloat16AsTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  if (!gpu_has_bf16_math()) GTEST_SKIP() << "cuda:0 has no bfloat16 math (compute capability below 8.0)";
  const std::vector<std::pair<std::string, Shape>> cases = {
      {"{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1}", {4, 16, 12, 12}},
      {"{name: c, type: conv, num_output: 16, kernel_size: 5, stride: 2, bias: false}", {2, 3, 21, 21}},
      {"{name: f, type: fc, num_output: 96}", {8, 200}},
      {"{name: f, type: fc, num_output: 10, bias: false}", {3, 4, 5, 6}},
  };
  for (const auto& [yaml, shape] : cases)
    for (bool relu : {false, true})
      for (bool overwrite : {false, true}) expect_computed_as_the_cpu(yaml, shape, {Precision::bf16, relu, overwrite});
}

// Batch norm computes in float32 on both, from the widened values, and
// rounds each output once; the GPU's kernels add into the input gradient
// (the Net zeroes it for them) and apply no ReLU of their own.
TEST(GpuBf16Blobs, BatchNormReadsAndWritesBfloat16AsTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (const Shape& shape : {Shape{4, 16, 12, 12}, Shape{64, 24}})
    expect_computed_as_the_cpu("{name: b, type: batch_norm}", shape, {Precision::bf16, false, false});
}

// The types a layer reads and writes for given input types, as one string.
std::string declared(const Layer& layer, const std::vector<DType>& in) {
  const auto* typed = dynamic_cast<const BlobTypes*>(&layer);
  if (!typed) return "no declaration";
  const DType read = typed->reads(in);
  return std::string(dtype_name(read)) + " -> " + dtype_name(typed->writes(read));
}

TEST(GpuBf16Blobs, GpuLayersDeclareTheTypesOfTheirCpuVersions) {
  if (!device_memory::cuda_built()) GTEST_SKIP() << "no CUDA backend in this build";
  const std::vector<std::string> types = {"{name: l, type: relu}",
                                          "{name: l, type: pool, kernel_size: 2}",
                                          "{name: l, type: dropout}",
                                          "{name: l, type: flatten}",
                                          "{name: l, type: concat}",
                                          "{name: l, type: sum}",
                                          "{name: l, type: conv, num_output: 4, kernel_size: 3}",
                                          "{name: l, type: fc, num_output: 4}",
                                          "{name: l, type: batch_norm}",
                                          "{name: l, type: batch_norm, precision: fp32}",
                                          "{name: l, type: relu, precision: fp32}"};
  const std::vector<std::vector<DType>> inputs = {
      {DType::bf16}, {DType::f32}, {DType::bf16, DType::bf16}, {DType::bf16, DType::f32}};
  for (const std::string& yaml : types)
    for (Precision p : {Precision::fp32, Precision::bf16}) {
      auto cpu = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"));
      auto gpu = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"), Device::cuda(0));
      cpu->set_precision(p);
      gpu->set_precision(p);
      ASSERT_NE(declared(*gpu, {DType::bf16}), "no declaration") << yaml;
      for (const auto& in : inputs)
        EXPECT_EQ(declared(*gpu, in), declared(*cpu, in)) << yaml << " at " << precision_name(p);
    }
  // A sum of more inputs than its bfloat16 kernel takes reads float32.
  auto sum = LayerRegistry::instance().create(ConfigNode::parse("{name: s, type: sum}", "t.yaml"), Device::cuda(0));
  EXPECT_EQ(declared(*sum, std::vector<DType>(16, DType::bf16)), "bf16 -> bf16");
  EXPECT_EQ(declared(*sum, std::vector<DType>(17, DType::bf16)), "f32 -> f32");
}

}  // namespace
}  // namespace poseidon::testing
