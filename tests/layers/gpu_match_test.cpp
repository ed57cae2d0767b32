// Walks the layer registry like the gradient check: every registered type
// must have a GPU implementation (in a build with the CUDA backend), and on
// every gradient-check case the GPU layer's forward and backward (outputs,
// accumulated input gradients, parameter gradients, updated buffers) equal
// the CPU layer's to relative 1e-4, with TF32 off; a case that fuses a ReLU
// into the layer (core/relu_fusion.h) does so on both sides, where the GPU
// layer applies one of its own (conv: cuDNN's fused bias and activation or
// the engine's bias epilogue). A value that is a sum of
// products (conv and fc) is allowed besides the rounding that two float32
// summations in different orders may differ by: a small multiple of the
// float32 epsilon times the sum of the terms' magnitudes, which the CPU
// layer computes when it runs on the operands' absolute values. Larger cases, for the GPU
// alone, cross what the small ones cannot: element-wise loops of several
// grid-stride passes, per-sample kernels over more samples than one grid's
// blocks, large FC weights, batch norm over many values per channel, the
// first layer of a net (no input gradient) and an FC weight whose gradient
// SFB forms outside backward. Without a GPU the comparisons skip and say why
// (or fail, where a GPU is expected: gpu_required.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>

#include "core/device_memory.h"
#include "core/registry.h"
#include "core/relu_fusion.h"
#include "gpu_required.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

namespace {

constexpr double kTolerance = 1e-4;
// Of the sum of the terms' magnitudes: about 16 float32 epsilons. Summing
// n terms in another order moves the result by about sqrt(n) roundings of
// partial sums far smaller than that sum (random signs), so the two sides
// stay well within this; a term missing, doubled or taken from the wrong
// place moves it by a whole term, which is far more.
constexpr double kSumTolerance = 1e-6;

// One layer with its own tensors on one device.
struct Side {
  Device device;
  std::unique_ptr<Layer> layer;
  bool relu_fused = false;  // the case fuses a ReLU and the layer took it
  std::vector<Tensor> in, in_grad, out, out_grad;
  LayerIO io;
};

// How the layer sits in its net, beyond the gradient check's cases.
struct Placement {
  bool first_layer = false;          // its input needs no gradient (conv1 on the data)
  bool weight_grad_skipped = false;  // its weight's gradient is left to SFB (LayerIO::skip_param_grad)
};

Side build(const GradCase& c, const Device& device, const Placement& placement) {
  Side s;
  s.device = device;
  s.layer = LayerRegistry::instance().create(ConfigNode::parse(c.yaml, c.name), device);
  if (c.fuse_relu) s.relu_fused = dynamic_cast<ReluFusable&>(*s.layer).fuse_relu();
  std::vector<Shape> out_shapes = s.layer->reshape(c.inputs);
  for (const auto& shape : c.inputs) {
    s.in.emplace_back(shape, device);
    s.in_grad.emplace_back(shape, device);
  }
  for (const auto& shape : out_shapes) {
    s.out.emplace_back(shape, device);
    s.out_grad.emplace_back(shape, device);
  }
  for (auto& p : s.layer->params()) {
    p.value = Tensor(p.shape, device);
    p.grad = Tensor(p.shape, device);
  }
  if (placement.weight_grad_skipped) s.io.skip_param_grad = {true};
  for (size_t k = 0; k < s.in.size(); ++k) {
    bool is_label = k < c.label_classes.size() && c.label_classes[k] > 0;
    s.io.in.push_back(&s.in[k]);
    s.io.in_grad.push_back(is_label || placement.first_layer ? nullptr : &s.in_grad[k]);
  }
  for (size_t k = 0; k < s.out.size(); ++k) {
    s.io.out.push_back(&s.out[k]);
    s.io.out_grad.push_back(&s.out_grad[k]);
  }
  return s;
}

// Fills `host` with random values (labels for label inputs) and copies them
// to both sides.
void set_both(Tensor& cpu, Tensor& gpu, std::mt19937_64& rng, int64_t classes = 0, float low = -1.f) {
  std::uniform_real_distribution<float> uni(low, 1.f);
  for (int64_t i = 0; i < cpu.numel(); ++i) cpu[i] = classes > 0 ? static_cast<float>(rng() % classes) : uni(rng);
  gpu.copy_from(cpu);
}

// Mismatches of `gpu` against `cpu`, relative to max(|a|, |b|, 1), plus
// kSumTolerance of the terms' magnitudes where `magnitude` (the same value
// computed from absolute values) is given.
void compare(const std::string& what, const Tensor& cpu, const Tensor& gpu, std::ostringstream& err, int& failures,
             const Tensor* magnitude = nullptr) {
  Tensor back = gpu.to(Device{});
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    double a = cpu[i], b = back[i];
    double scale = std::max({std::abs(a), std::abs(b), 1.0});
    double allowed = kTolerance * scale + (magnitude ? kSumTolerance * (*magnitude)[i] : 0.0);
    if (!(std::abs(a - b) <= allowed) && ++failures <= 5)
      err << what << "[" << i << "]: cpu " << a << " gpu " << b << "\n";
  }
}

// Layers whose outputs and gradients are sums of products of their operands,
// so that the layer run on absolute values gives each sum's magnitude.
bool sums_products(const Layer& layer) { return layer.type() == "conv" || layer.type() == "fc"; }

Tensor absolute(const Tensor& t) {
  Tensor out(t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = std::abs(t[i]);
  return out;
}

// `bound` takes the absolute values of `cpu`'s operands (inputs, gradients
// added into, parameters, output gradients).
void set_absolute(const Side& cpu, Side& bound) {
  for (size_t k = 0; k < cpu.in.size(); ++k) {
    bound.in[k].copy_from(absolute(cpu.in[k]));
    bound.in_grad[k].copy_from(absolute(cpu.in_grad[k]));
  }
  for (size_t i = 0; i < cpu.layer->params().size(); ++i) {
    bound.layer->param(i).value.copy_from(absolute(cpu.layer->param(i).value));
    bound.layer->param(i).grad.copy_from(absolute(cpu.layer->param(i).grad));
  }
  for (size_t k = 0; k < cpu.out.size(); ++k) bound.out_grad[k].copy_from(absolute(cpu.out_grad[k]));
}

// The mismatches, or "" where they agree; nullopt where the case fuses a
// ReLU that the GPU layer does not apply itself.
std::optional<std::string> compare_case(const GradCase& c, const Placement& placement = {}) {
  Side cpu = build(c, Device{}, placement);
  Side gpu = build(c, Device::cuda(0), placement);
  if (c.fuse_relu && !gpu.relu_fused) return std::nullopt;
  std::mt19937_64 rng(99);
  for (size_t k = 0; k < cpu.in.size(); ++k) {
    int64_t classes = k < c.label_classes.size() ? c.label_classes[k] : 0;
    set_both(cpu.in[k], gpu.in[k], rng, classes);
    // Backward adds into input gradients: start them away from zero.
    set_both(cpu.in_grad[k], gpu.in_grad[k], rng);
  }
  for (size_t i = 0; i < cpu.layer->params().size(); ++i) {
    Param& pc = cpu.layer->param(i);
    Param& pg = gpu.layer->param(i);
    // Variances must be positive; every other parameter may take any sign.
    set_both(pc.value, pg.value, rng, 0, pc.name.ends_with("running_var") ? 0.5f : -1.f);
    set_both(pc.grad, pg.grad, rng);
  }
  for (size_t k = 0; k < cpu.out.size(); ++k) set_both(cpu.out_grad[k], gpu.out_grad[k], rng);
  // The magnitudes of the sums, where the layer's values are sums of products.
  std::optional<Side> bound;
  if (sums_products(*cpu.layer)) {
    bound.emplace(build(c, Device{}, placement));
    set_absolute(cpu, *bound);
  }
  auto magnitude = [&](auto pick) -> const Tensor* { return bound ? &pick(*bound) : nullptr; };

  // Stochastic layers draw from the same host generator on both sides.
  std::mt19937_64 rng_cpu(5), rng_gpu(5);
  RunContext ctx_cpu{c.train ? Phase::train : Phase::test, &rng_cpu, Device{}};
  RunContext ctx_gpu{c.train ? Phase::train : Phase::test, &rng_gpu, Device::cuda(0)};
  cpu.layer->forward(cpu.io, ctx_cpu);
  gpu.layer->forward(gpu.io, ctx_gpu);
  if (bound) bound->layer->forward(bound->io, ctx_cpu);
  std::ostringstream err;
  int failures = 0;
  for (size_t k = 0; k < cpu.out.size(); ++k)
    compare("output " + std::to_string(k), cpu.out[k], gpu.out[k], err, failures,
            magnitude([&](Side& s) -> Tensor& { return s.out[k]; }));
  if (cpu.layer->differentiable()) {
    cpu.layer->backward(cpu.io, ctx_cpu);
    gpu.layer->backward(gpu.io, ctx_gpu);
    if (bound) bound->layer->backward(bound->io, ctx_cpu);
    for (size_t k = 0; k < cpu.in.size(); ++k)
      if (cpu.io.in_grad[k])
        compare("input gradient " + std::to_string(k), cpu.in_grad[k], gpu.in_grad[k], err, failures,
                magnitude([&](Side& s) -> Tensor& { return s.in_grad[k]; }));
    // A gradient SFB forms is left as it was on both sides (backward must
    // not write it), so it compares equal too.
    for (size_t i = 0; i < cpu.layer->params().size(); ++i) {
      const Param& pc = cpu.layer->param(i);
      if (pc.learnable)
        compare(pc.name + " gradient", pc.grad, gpu.layer->param(i).grad, err, failures,
                magnitude([&](Side& s) -> Tensor& { return s.layer->param(i).grad; }));
    }
    for (size_t k = 0; k < cpu.in.size(); ++k)
      if (!cpu.io.in_grad[k])
        compare("untouched input gradient " + std::to_string(k), cpu.in_grad[k], gpu.in_grad[k], err, failures);
  }
  // Buffers (running statistics) as updated by the forward pass.
  for (size_t i = 0; i < cpu.layer->params().size(); ++i) {
    const Param& pc = cpu.layer->param(i);
    if (!pc.learnable) compare(pc.name, pc.value, gpu.layer->param(i).value, err, failures);
  }
  if (failures) err << failures << " mismatches in total";
  return err.str();
}

}  // namespace

TEST(CudaLayers, EveryTypeHasAGpuImplementation) {
  if (!device_memory::cuda_built()) GTEST_SKIP() << device_memory::cuda_unavailable_reason();
  for (const auto* info : LayerRegistry::instance().all())
    EXPECT_TRUE(!LayerRegistry::instance().origin(info->type).empty() || LayerRegistry::instance().has_cuda(info->type))
        << "layer type '" << info->type << "' has no GPU implementation (layers/" << info->type << ".cu)";
}

class GpuMatchesCpu : public ::testing::TestWithParam<GradCase> {};

TEST_P(GpuMatchesCpu, ForwardAndBackward) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const std::optional<std::string> failure = compare_case(GetParam());
  if (!failure) GTEST_SKIP() << "the GPU layer applies no ReLU of its own (core/relu_fusion.h)";
  EXPECT_TRUE(failure->empty()) << GetParam().name << ":\n" << *failure;
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GpuMatchesCpu, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return info.param.name; });

struct LargeCase {
  GradCase layer;
  Placement placement;
};

void PrintTo(const LargeCase& c, std::ostream* os) { *os << c.layer.name; }

// 1,048,576 values fill one grid-stride pass (cuda::kMaxBlocks blocks of 256
// threads); 4096 samples fill one grid of per-sample blocks.
const std::vector<LargeCase>& large_cases() {
  static const std::vector<LargeCase> cases = {
      {{"relu_grid_stride", "{name: r, type: relu}", {{1, 2, 1024, 700}}}},
      {{"conv_first_layer", "{name: conv1, type: conv, num_output: 64, kernel_size: 3, pad: 1}", {{2, 3, 112, 112}}},
       {.first_layer = true}},
      {{"conv_grid_stride", "{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1}", {{2, 16, 160, 160}}}},
      {{.name = "conv_relu_fused_grid_stride",
        .yaml = "{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1}",
        .inputs = {{2, 16, 160, 160}},
        .fuse_relu = true}},
      {{.name = "conv_relu_fused_no_bias",
        .yaml = "{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1, bias: false}",
        .inputs = {{2, 16, 40, 40}},
        .fuse_relu = true}},
      {{"pool_max_grid_stride", "{name: p, type: pool, kernel_size: 2, stride: 2}", {{2, 64, 112, 112}}}},
      {{"pool_avg_grid_stride",
        "{name: p, type: pool, mode: avg, kernel_size: 3, stride: 1, pad: 1}",
        {{2, 32, 140, 140}}}},
      {{"batch_norm_many_values", "{name: bn, type: batch_norm}", {{8, 16, 112, 112}}}},
      {{"batch_norm_test_many_values", "{name: bn, type: batch_norm}", {{8, 16, 112, 112}}, {}, false}},
      // More channels than a grid has rows (65535): a batch norm over a wide fc output.
      {{"batch_norm_many_channels", "{name: bn, type: batch_norm}", {{4, 70000}}}},
      // The slopes' gradients over many chunks of values, one slope shared
      // by all of them, and more slopes than a grid has rows.
      {{"prelu_many_values", "{name: p, type: prelu}", {{8, 16, 112, 112}}}},
      {{"prelu_shared_many_values", "{name: p, type: prelu, channel_shared: true}", {{8, 16, 112, 112}}}},
      {{"prelu_many_channels", "{name: p, type: prelu}", {{4, 70000}}}},
      {{"fc_large_weights", "{name: fc6, type: fc, num_output: 4096}", {{4, 9216}}}},
      {{"fc_under_sfb", "{name: fc7, type: fc, num_output: 1000}", {{8, 4096}}}, {.weight_grad_skipped = true}},
      {{"softmax_many_values", "{name: s, type: softmax}", {{1200, 1000}}}},
      {{"softmax_loss_many_samples", "{name: loss, type: softmax_loss}", {{5000, 10}, {5000}}, {0, 10}}},
      {{"accuracy_many_samples", "{name: a, type: accuracy, top_k: 3}", {{5000, 10}, {5000}}, {0, 10}}},
      {{"concat_grid_stride", "{name: c, type: concat}", {{2, 24, 150, 150}, {2, 8, 150, 150}}}},
      {{"sum_grid_stride", "{name: s, type: sum}", {{2, 32, 150, 150}, {2, 32, 150, 150}}}},
      {{"dropout_grid_stride", "{name: d, type: dropout, ratio: 0.3}", {{2, 32, 150, 150}}}},
      {{"flatten_grid_stride", "{name: f, type: flatten}", {{2, 32, 150, 150}}}},
      {{"adaptive_avg_pool_grid_stride",
        "{name: p, type: adaptive_avg_pool, output_size: [7, 7]}",
        {{16, 512, 14, 14}}}},
  };
  return cases;
}

class GpuMatchesCpuLarge : public ::testing::TestWithParam<LargeCase> {};

TEST_P(GpuMatchesCpuLarge, ForwardAndBackward) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const std::string failure = compare_case(GetParam().layer, GetParam().placement).value();
  EXPECT_TRUE(failure.empty()) << GetParam().layer.name << ":\n" << failure;
}

INSTANTIATE_TEST_SUITE_P(LargeShapes, GpuMatchesCpuLarge, ::testing::ValuesIn(large_cases()),
                         [](const auto& info) { return info.param.layer.name; });

// Every convolution case again with cuDNN's fastest backward algorithms,
// which sum with atomics (`deterministic: false`): the same comparisons hold.
TEST(GpuMatchesCpuFastest, ConvolutionsMatchTheCpu) {
  POSEIDON_SKIP_WITHOUT_GPU();
  auto is_conv = [](const GradCase& c) { return c.yaml.find("type: conv") != std::string::npos; };
  device_memory::set_deterministic(Device::cuda(0), false);
  std::string failures;
  int cases = 0;
  for (const GradCase& c : grad_cases())
    if (is_conv(c)) failures += compare_case(c).value(), ++cases;
  for (const LargeCase& c : large_cases())
    if (is_conv(c.layer)) failures += compare_case(c.layer, c.placement).value(), ++cases;
  device_memory::set_deterministic(Device::cuda(0), true);
  EXPECT_GE(cases, 10);
  EXPECT_TRUE(failures.empty()) << failures;
}

}  // namespace poseidon::testing
