// Precision bf16 on a GPU (layers/conv.cu, layers/fc.cu): the GPU's casts
// against the CPU's arithmetic (its bias sums: tests/core/channel_sums_test.cpp); the GPU conv and fc layers in
// bf16 against the CPU computing on the same bfloat16 operands (and against
// oneDNN's bf16 layers where this CPU has them) and against float32; a bf16
// training step against a float32 one; training steps that allocate nothing
// after the first; and bf16 refused on GPUs without bfloat16 tensor cores.
// Without a GPU of compute capability 8.0 or later the GPU tests skip and say
// why (or fail, where a GPU is expected: gpu_required.h). On the CPU the same
// references are held against the CPU's bf16 layers and training step
// (oneDNN's bfloat16 kernels, or before AVX-512 its float32 kernels on
// rounded operands), which checks the references and tolerances the GPU
// tests rely on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "core/bf16.h"
#include "core/device_info.h"
#include "core/device_memory.h"
#include "core/local_sink.h"
#include "core/net.h"
#include "core/registry.h"
#include "core/solver.h"
#include "gpu_required.h"
#ifdef POSEIDON_HAVE_CUDA
#include "core/cuda/bf16.h"
#include "core/cuda/context.h"
#endif

namespace poseidon::testing {
namespace {

// Why GPU 0 cannot multiply in bfloat16, or "" where it can.
std::string no_bf16_reason() {
  for (const device_info::Gpu& gpu : device_info::visible_gpus())
    if (gpu.index == 0 && gpu.compute_major < 8)
      return "cuda:0 (" + gpu.name + ") is older than compute capability 8.0: no bfloat16 math";
  return "";
}

#define SKIP_WITHOUT_BF16_GPU()                                                               \
  do {                                                                                        \
    POSEIDON_SKIP_WITHOUT_GPU();                                                              \
    if (const std::string reason = no_bf16_reason(); !reason.empty()) GTEST_SKIP() << reason; \
  } while (0)

// The GPU and the CPU multiply the same bfloat16 numbers (the GPU's casts
// round bit for bit as the CPU does: CastsMatchTheCpu), so every
// product is the same float32 number on both; they only sum the products in
// other orders, in float32 (about 1e-6 of the result, normwise, at these
// sizes). 1e-4, gpu_match_test's GPU-against-CPU tolerance, is twenty times
// below a single bfloat16 rounding (2^-9 = 2e-3, relative): an operand
// rounded otherwise, or not at all, fails it.
constexpr double kSameOperands = 1e-4;
// Bfloat16 convolutions write some results in bfloat16, which the layer
// widens: cuDNN's the output, the input and the weight gradients; oneDNN's
// (on the CPU) the output and the input gradient, as autocast's convolution
// returns them. Each such element is off by at most half a bfloat16 step,
// 2^-9 of itself, from the float32 sum.
constexpr double kConvResultRounding = 1.0 / 512;

// Everything a layer's forward and backward read, drawn once on the host:
// the input, each parameter, the output gradient, and the input gradient
// backward adds into (away from zero, so that the adding is checked).
struct Operands {
  Tensor x, dy, dx;
  std::vector<Tensor> params;
};

// A layer's results, copied to the host.
struct Results {
  Tensor y, dx;
  std::vector<Tensor> grads;
};

// A copy of `t` on `device` that shares no storage with it (Tensor::to
// shares where the device is the same).
Tensor copy_on(const Tensor& t, const Device& device) {
  Tensor c(t.shape(), device);
  c.copy_from(t);
  return c;
}

std::unique_ptr<Layer> make_layer(const std::string& yaml, const Device& device, Precision precision) {
  std::unique_ptr<Layer> layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "layer.yaml"), device);
  layer->set_precision(precision);
  return layer;
}

Operands draw(const std::string& yaml, const Shape& in_shape) {
  std::unique_ptr<Layer> layer = make_layer(yaml, Device{}, Precision::fp32);
  const Shape out_shape = layer->reshape({in_shape}).at(0);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  auto drawn = [&](const Shape& shape) {
    Tensor t(shape);
    for (int64_t i = 0; i < t.numel(); ++i) t[i] = uni(rng);
    return t;
  };
  Operands o{drawn(in_shape), drawn(out_shape), drawn(in_shape), {}};
  for (const Param& p : layer->params()) o.params.push_back(drawn(p.shape));
  return o;
}

// The operands as a bf16 layer multiplies them: input, weight and output
// gradient rounded to bfloat16; the bias, added in float32, and the input
// gradient, added into in float32, as they are.
Operands rounded(const Operands& o) {
  const Device host;
  Operands r{copy_on(o.x, host), copy_on(o.dy, host), copy_on(o.dx, host), {}};
  for (const Tensor& p : o.params) r.params.push_back(copy_on(p, host));
  for (Tensor* t : {&r.x, &r.dy, &r.params[0]}) round_to_bf16(t->data(), t->numel());
  return r;
}

Results run(const std::string& yaml, const Shape& in_shape, const Operands& o, const Device& device,
            Precision precision) {
  std::unique_ptr<Layer> layer = make_layer(yaml, device, precision);
  const Shape out_shape = layer->reshape({in_shape}).at(0);
  for (size_t k = 0; k < layer->params().size(); ++k) {
    Param& p = layer->param(k);
    p.value = copy_on(o.params[k], device);
    p.grad = Tensor(p.shape, device);
  }
  Tensor x = copy_on(o.x, device), dy = copy_on(o.dy, device), dx = copy_on(o.dx, device), y(out_shape, device);
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx{Phase::train, nullptr, device};
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  const Device host;
  Results r{copy_on(y, host), copy_on(dx, host), {}};
  for (const Param& p : layer->params()) r.grads.push_back(copy_on(p.grad, host));
  return r;
}

// Each result's normwise error against the reference's, by name.
std::vector<std::pair<std::string, double>> errors(const Results& got, const Results& want) {
  std::vector<std::pair<std::string, double>> e = {{"output", norm_relative_error(got.y, want.y)},
                                                   {"input gradient", norm_relative_error(got.dx, want.dx)}};
  for (size_t k = 0; k < want.grads.size(); ++k)
    e.push_back({k == 0 ? "weight gradient" : "bias gradient", norm_relative_error(got.grads[k], want.grads[k])});
  return e;
}

// The GPU layer in bf16 against the CPU's bf16 arithmetic (float32 on the
// rounded operands, and the CPU's bf16 layer) within `same_operands` per
// result, and against float32 within
// bfloat16's tolerance while clearly off float32's numbers.
void expect_gpu_bf16_right(const std::string& yaml, const Shape& in_shape) {
  const bool conv = yaml.find("type: conv") != std::string::npos;
  const Operands o = draw(yaml, in_shape);
  const Results gpu = run(yaml, in_shape, o, Device::cuda(0), Precision::bf16);
  // Conv results other than the bias gradient (summed in float32) come out
  // of cuDNN rounded to bfloat16.
  auto same_operands = [&](const std::string& what) {
    return conv && what != "bias gradient" ? kSameOperands + kConvResultRounding : kSameOperands;
  };
  for (const auto& [what, error] : errors(gpu, run(yaml, in_shape, rounded(o), Device{}, Precision::fp32)))
    EXPECT_LE(error, same_operands(what)) << yaml << ": " << what << " against float32 on bfloat16 operands";
  for (const auto& [what, error] : errors(gpu, run(yaml, in_shape, o, Device{}, Precision::bf16)))
    EXPECT_LE(error, same_operands(what)) << yaml << ": " << what << " against the CPU's bf16 layer";
  for (const auto& [what, error] : errors(gpu, run(yaml, in_shape, o, Device{}, Precision::fp32))) {
    EXPECT_LE(error, kBf16Tolerance) << yaml << ": " << what << " against float32";
    EXPECT_GT(error, kFloat32Noise) << yaml << ": " << what << " is float32's: bfloat16 did not run";
  }
}

using LayerCase = std::pair<std::string, Shape>;

const std::vector<LayerCase> kConvCases = {
    {"{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1}", {4, 16, 12, 12}},
    {"{name: c, type: conv, num_output: 16, kernel_size: 5, stride: 2}", {2, 3, 21, 21}},
    {"{name: c, type: conv, num_output: 64, kernel_size: 1, bias: false}", {2, 32, 7, 7}},
    {"{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1, groups: 4}", {2, 16, 9, 9}},
};

const std::vector<LayerCase> kFcCases = {
    {"{name: f, type: fc, num_output: 96}", {8, 200}},
    {"{name: f, type: fc, num_output: 10, bias: false}", {3, 4, 5, 6}},
    {"{name: f, type: fc, num_output: 70}", {9, 130}},
};

TEST(GpuBf16, ConvMatchesTheCpu) {
  SKIP_WITHOUT_BF16_GPU();
  for (const auto& [yaml, shape] : kConvCases) expect_gpu_bf16_right(yaml, shape);
}

TEST(GpuBf16, FcMatchesTheCpu) {
  SKIP_WITHOUT_BF16_GPU();
  for (const auto& [yaml, shape] : kFcCases) expect_gpu_bf16_right(yaml, shape);
}

// The reference of the two tests above: the CPU's bf16 layers compute what
// float32 computes on the rounded operands, up to the rounding of a
// convolution's output and input gradient by oneDNN's bfloat16 kernels.
TEST(Bf16Reference, CpuBf16IsFloat32OnRoundedOperands) {
  for (const auto* cases : {&kConvCases, &kFcCases})
    for (const auto& [yaml, shape] : *cases) {
      const bool conv = cases == &kConvCases;
      const Operands o = draw(yaml, shape);
      const Results cpu = run(yaml, shape, o, Device{}, Precision::bf16);
      for (const auto& [what, error] : errors(cpu, run(yaml, shape, rounded(o), Device{}, Precision::fp32))) {
        const bool rounded_result = conv && (what == "output" || what == "input gradient");
        EXPECT_LE(error, rounded_result ? kSameOperands + kConvResultRounding : kSameOperands) << yaml << ": " << what;
      }
    }
}

// A net without switched choices (tanh, no ReLU or max pooling, where a
// rounding-sized difference can move a whole gradient to another element).
constexpr const char* kSmoothNet = R"(name: smooth
inputs: {data: [3, 12, 12], label: []}
layers:
  - {name: conv1, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: tanh1, type: tanh}
  - {name: conv2, type: conv, num_output: 16, kernel_size: 3, stride: 2}
  - {name: tanh2, type: tanh}
  - {name: fc1, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

// A weight's gradient carries the rounding of every bfloat16 product on its
// path: conv1's the forward conv1, conv2 and fc1 and the backward fc1,
// conv2 and its own weight gradient, six products, each off by about u/2
// normwise (its operands' rounding, and cuDNN's bfloat16 result); tanh's
// slope is at most 1, so they do not grow on the way. Independent, they add
// to about sqrt(6) u/2 = 1.2 u (u = 2^-8); two momentum steps sum such
// gradients. 2e-2 (5 u) leaves room for that, and a gradient gone wrong
// (an error near 1) fails it.
constexpr double kStepTolerance = 2e-2;

struct Trained {
  float loss = 0;
  std::vector<Tensor> initial, final;  // each parameter, on the host
};

// Two SGD steps with momentum of the smooth net on `device` at `precision`,
// from the same parameters and data in every call.
Trained train_two_steps(const Device& device, Precision precision) {
  Net net(ConfigNode::parse(kSmoothNet, "smooth.yaml"), 8, device);
  net.set_precision(precision);
  net.init_params(3);
  Tensor data(net.blob("data").value.shape()), label(net.blob("label").value.shape());
  std::mt19937_64 data_rng(9);
  std::uniform_real_distribution<float> pixel(-1.f, 1.f);
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = pixel(data_rng);
  for (int64_t i = 0; i < label.numel(); ++i) label[i] = static_cast<float>(i % 10);
  net.blob("data").value.copy_from(data);
  net.blob("label").value.copy_from(label);
  Trained t;
  for (const Param* p : net.params()) t.initial.push_back(copy_on(p->value, Device{}));
  Solver solver(SolverConfig::parse(ConfigNode::parse("{lr: 0.1, momentum: 0.9}", "solver")));
  LocalGradSink sink(solver);
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, device};
  for (int step = 0; step < 2; ++step) {
    const float loss = net.forward(ctx);
    if (step == 0) t.loss = loss;
    net.backward(ctx, sink);
  }
  for (const Param* p : net.params()) t.final.push_back(copy_on(p->value, Device{}));
  return t;
}

Tensor difference(const Tensor& a, const Tensor& b) {
  Tensor d(a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) d[i] = a[i] - b[i];
  return d;
}

void expect_step_follows_float32(const Device& device) {
  const Trained want = train_two_steps(device, Precision::fp32);
  const Trained got = train_two_steps(device, Precision::bf16);
  EXPECT_NEAR(got.loss, want.loss, kStepTolerance * want.loss);
  ASSERT_EQ(got.final.size(), want.final.size());
  for (size_t k = 0; k < want.final.size(); ++k) {
    for (int64_t i = 0; i < want.initial[k].numel(); ++i)
      ASSERT_EQ(got.initial[k][i], want.initial[k][i]) << "initial parameter " << k << " [" << i << "]";
    const double error =
        norm_relative_error(difference(got.final[k], got.initial[k]), difference(want.final[k], want.initial[k]));
    EXPECT_LE(error, kStepTolerance) << "update of parameter " << k;
    EXPECT_GT(error, kFloat32Noise) << "update of parameter " << k << " is float32's: bfloat16 did not run";
    // The solver's weights stay float32: the layers rounded copies of them,
    // never the weights themselves.
    int64_t beyond_bf16 = 0;
    for (int64_t i = 0; i < got.final[k].numel(); ++i)
      beyond_bf16 += from_bf16(to_bf16(got.final[k][i])) != got.final[k][i];
    EXPECT_GT(beyond_bf16, got.final[k].numel() / 2) << "parameter " << k << " holds bfloat16 values";
  }
}

TEST(GpuBf16, TrainingStepFollowsFloat32) {
  SKIP_WITHOUT_BF16_GPU();
  expect_step_follows_float32(Device::cuda(0));
}

// The same on the CPU, whose bf16 layers the GPU's follow.
TEST(Bf16Reference, CpuTrainingStepFollowsFloat32) { expect_step_follows_float32(Device{}); }

#ifdef POSEIDON_HAVE_CUDA

// Values that test the rounding: ties to even either way, just above and
// below a tie, the largest float (rounds to infinity), infinities, NaNs
// (signalling too), subnormals, and zeros of both signs.
std::vector<float> rounding_cases() {
  std::vector<float> v;
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                        0x7fc00000u, 0x7f800001u, 0x00008000u, 0x00018000u, 0x00000001u, 0x80000000u, 0x00000000u})
    v.push_back(bits_float(bits));
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<float> uni(-100.f, 100.f);
  while (v.size() < 5000) v.push_back(uni(rng));
  return v;
}

TEST(GpuBf16, CastsMatchTheCpu) {
  SKIP_WITHOUT_BF16_GPU();
  cuda::Context& gpu = cuda::Context::get(0);
  const std::vector<float> values = rounding_cases();
  const size_t n = values.size();
  Tensor host({static_cast<int64_t>(n)});
  std::copy(values.begin(), values.end(), host.data());
  const Tensor device_values = host.to(Device::cuda(0));
  // n bfloat16 values in a float tensor of half as many elements.
  Tensor halves({static_cast<int64_t>(n / 2)}, Device::cuda(0));
  auto* bits = reinterpret_cast<uint16_t*>(halves.data());
  cuda::round_to_bf16(bits, device_values.data(), n, gpu.compute());
  const Tensor back = halves.to(Device{});
  const auto* got = reinterpret_cast<const uint16_t*>(back.data());
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], to_bf16(values[i])) << "value " << i << " (bits " << std::hex << float_bits(values[i]) << ")";

  // Widening, then widening that adds: exactly the float of each bfloat16.
  Tensor widened({static_cast<int64_t>(n)}, Device::cuda(0));
  cuda::widen_bf16(widened.data(), bits, n, false, gpu.compute());
  cuda::widen_bf16(widened.data(), bits, n, true, gpu.compute());
  const Tensor twice = widened.to(Device{});
  for (size_t i = 0; i < n; ++i) {
    const float want = from_bf16(to_bf16(values[i])) * 2.f;
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(twice[i])) << i;
    else
      EXPECT_EQ(twice[i], want) << i;
  }
}

// The staging buffers grow at the first step and are reused after it: no
// further cudaMalloc (LeNet: convolutions and FC layers of several sizes).
TEST(GpuBf16, StepsAllocateNothingAfterTheFirst) {
  SKIP_WITHOUT_BF16_GPU();
  const Device gpu = Device::cuda(0);
  Net net(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"), 16, gpu);
  net.set_precision(Precision::bf16);
  net.init_params(1);
  Solver solver(SolverConfig::parse(ConfigNode::parse("{lr: 0.01, momentum: 0.9}", "solver")));
  LocalGradSink sink(solver);
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::train, &rng, gpu};
  auto step = [&] {
    net.forward(ctx);
    net.backward(ctx, sink);
    device_memory::synchronize(gpu);
  };
  step();
  const size_t after_first = cuda::Context::get(0).allocator().stats().driver_allocations;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(cuda::Context::get(0).allocator().stats().driver_allocations, after_first);
}

#endif  // POSEIDON_HAVE_CUDA

TEST(GpuBf16, RefusedBelowComputeCapability8) {
  const device_info::Gpu volta{.index = 1, .name = "Tesla V100-SXM2-16GB", .compute_major = 7, .compute_minor = 0};
  try {
    require_precision_on_gpu(Precision::bf16, volta);
    ADD_FAILURE() << "bf16 accepted on a compute capability 7.0 GPU";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("compute capability 8.0 or later"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda:1 (Tesla V100-SXM2-16GB) has 7.0"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(require_precision_on_gpu(Precision::fp32, volta));
  EXPECT_NO_THROW(require_precision_on_gpu(Precision::tf32, volta));
  const device_info::Gpu ampere{.index = 0, .name = "NVIDIA A100", .compute_major = 8, .compute_minor = 0};
  EXPECT_NO_THROW(require_precision_on_gpu(Precision::bf16, ampere));
  // Through the device, as configs and nets ask: refused only where cuda:0
  // is visible and too old.
  if (no_bf16_reason().empty())
    EXPECT_NO_THROW(require_precision_on(Precision::bf16, Device::cuda(0)));
  else
    EXPECT_THROW(require_precision_on(Precision::bf16, Device::cuda(0)), Error);
}

}  // namespace
}  // namespace poseidon::testing
