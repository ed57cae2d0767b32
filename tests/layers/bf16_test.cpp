// bf16 mixed precision of the layers that have it (conv, fc) against the same
// layer in float32, forward and backward; fc's oneDNN path in float32 against
// its BLAS path; and the Net's handing out of the run's precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "bf16_check.h"
#include "core/error.h"
#include "core/net.h"
#include "core/registry.h"
#include "layers/bf16_dot_rate.h"
#include "seeded_fill.h"

namespace poseidon::testing {
namespace {

struct Outputs {
  Tensor y, dx;
  std::vector<Tensor> param_grads;
};

// Runs forward and backward of the layer `yaml` on an input of `in_shape`
// at `precision`; every value is drawn from the same seed, so two calls see
// identical inputs, parameters and output gradients. The input gradient
// holds `dx_start` everywhere before backward, which adds into it, or
// overwrites it with `overwrite_dx`.
Outputs run_layer(const std::string& yaml, const Shape& in_shape, Precision precision, float dx_start = 0.f,
                  bool overwrite_dx = false) {
  std::unique_ptr<Layer> layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "layer.yaml"));
  layer->set_precision(precision);
  const Shape out_shape = layer->reshape({in_shape}).at(0);
  SeededFill values(11);
  values.fill_params(*layer);
  Outputs o{Tensor(out_shape), Tensor(in_shape), {}};
  Tensor x(in_shape), dy(out_shape);
  values.fill(x);
  values.fill(dy);
  for (int64_t i = 0; i < o.dx.numel(); ++i) o.dx[i] = dx_start;
  LayerIO io{{&x}, {&o.y}, {&dy}, {&o.dx}};
  io.in_grad_unset = {overwrite_dx};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  for (Param& p : layer->params()) o.param_grads.push_back(p.grad);
  return o;
}

// With float32_bias_grad the bias gradient is summed from the float32 dy
// (the conv layer's matrix-product path on oneDNN's bfloat16 kernels): it
// must be float32's. On a CPU without bfloat16 kernels the float32 engines
// multiply rounded operands, the output gradient too, so there the bias
// gradient is bfloat16-sized like the rest.
void expect_bf16_close_to_fp32(const std::string& yaml, const Shape& in_shape, bool float32_bias_grad = false) {
  const Outputs want = run_layer(yaml, in_shape, Precision::fp32);
  const Outputs got = run_layer(yaml, in_shape, Precision::bf16);
  float32_bias_grad = float32_bias_grad && dnnl_runs_bf16_kernels();
  std::vector<std::pair<std::string, double>> errors = {{"output", norm_relative_error(got.y, want.y)},
                                                        {"input grad", norm_relative_error(got.dx, want.dx)}};
  for (size_t k = 0; k < want.param_grads.size(); ++k)
    errors.push_back({"param grad " + std::to_string(k), norm_relative_error(got.param_grads[k], want.param_grads[k])});
  for (const auto& [what, error] : errors) {
    if (float32_bias_grad && what == "param grad 1") {
      EXPECT_LE(error, kFloat32Noise) << yaml << ": the bias gradient is not float32's";
      continue;
    }
    EXPECT_LE(error, kBf16Tolerance) << yaml << ": " << what;
    EXPECT_GT(error, kFloat32Noise) << yaml << ": " << what << " is float32's: bfloat16 did not run";
  }
}

#ifdef POSEIDON_HAVE_DNNL

TEST(Bf16Layers, ConvAgreesWithFloat32) {
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1}", {4, 16, 12, 12});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 16, kernel_size: 5, stride: 2}", {2, 3, 21, 21});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 64, kernel_size: 1, bias: false}", {2, 32, 7, 7});
  // Wide 3x3: Winograd where oneDNN stops at AVX2 (there on rounded
  // operands, like every engine without bfloat16 kernels), and the im2col
  // engine on request.
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1}", {2, 32, 8, 8});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 16, kernel_size: 3, pad: 1, engine: im2col}",
                            {2, 8, 6, 6});
  // Without bias, pointwise or on small images: the weight gradient as a
  // matrix product, over x unrolled where it is not the matrix already
  // (padding, strides that round down, dilation, a 1x7 kernel, one pixel,
  // a strided 1x1 kernel on a larger image).
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 48, kernel_size: 1, bias: false}", {5, 80, 3, 3});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 32, kernel_size: 1, bias: false}", {6, 64, 1, 1});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 48, kernel_size: 3, stride: 2, bias: false}",
                            {3, 32, 8, 8});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 32, kernel_size: [1, 7], pad: [0, 3], bias: false}",
                            {4, 48, 3, 3});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 16, kernel_size: 3, pad: 2, dilation: 2, bias: false}",
                            {2, 32, 6, 5});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 32, kernel_size: 3, pad: 1, bias: false}",
                            {5, 64, 1, 1});
  expect_bf16_close_to_fp32("{name: c, type: conv, num_output: 64, kernel_size: 1, stride: 2, bias: false}",
                            {3, 32, 9, 9});
  // Small images with bias: the whole convolution as matrix products
  // (conv_matmul.h), at 4x4, 2x2, 3x3 and 1x1 outputs, padded, strided, with
  // Inception's 1x3 and 3x1 kernels; the bias gradient sums the float32 dy.
  for (const auto& [yaml, shape] : std::vector<std::pair<std::string, Shape>>{
           {"{name: c, type: conv, num_output: 64, kernel_size: 3, pad: 1}", {4, 48, 4, 4}},
           {"{name: c, type: conv, num_output: 64, kernel_size: 3, pad: 1}", {8, 64, 2, 2}},
           {"{name: c, type: conv, num_output: 32, kernel_size: [1, 3], pad: [0, 1]}", {4, 48, 3, 3}},
           {"{name: c, type: conv, num_output: 32, kernel_size: [3, 1], pad: [1, 0]}", {4, 48, 3, 3}},
           {"{name: c, type: conv, num_output: 48, kernel_size: 3, stride: 2}", {3, 32, 8, 8}},
           {"{name: c, type: conv, num_output: 32, kernel_size: 1}", {6, 64, 1, 1}}})
    expect_bf16_close_to_fp32(yaml, shape, true);
}

TEST(Bf16Layers, FcAgreesWithFloat32) {
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 96}", {8, 200});
  // Above batch 32 the weight gradient is oneDNN's product, not the
  // small-batch kernel (layers/small_batch_weight_grad.h), in bf16.
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 96}", {40, 200});
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 10, bias: false}", {3, 4, 5, 6});
  // Matrices of up to 131072 floats are rounded by the layer's own loop, larger
  // ones by oneDNN (layers/fc_dnnl.cpp): here x and dy by the loop, w by
  // oneDNN, at batch 1.
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 300}", {1, 500});
  // 4096 outputs: float32's backward products read a column-major copy of dy.
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 4096}", {4, 40});
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 4500, bias: false}", {3, 40});
  // BLAS on request: its float32 products on rounded operands.
  expect_bf16_close_to_fp32("{name: f, type: fc, num_output: 96, engine: blas}", {8, 200});
}

// Two float32 paths sum the same products in other orders: 1e-5, as the
// convolution's oneDNN test. 4096 outputs and more read dy column-major in
// the backward products, except at batch 1. Up to batch 12 the weight
// gradient is the small-batch kernel's where the CPU has AVX-512
// (small_batch_weight_grad.h), above oneDNN's product; 3072 features at
// batch 20 are a shape where oneDNN's first choice of kernel for the input
// gradient is much slower than the one the layer asks for (fc_dnnl.cpp).
// The input gradient starts at 0.5: backward adds into it, or overwrites it
// where the layer is told that nothing else wrote it.
TEST(Bf16Layers, FcOneDnnAgreesWithBlasInFloat32) {
  for (const auto& [outputs, in_shape] : std::vector<std::pair<int, Shape>>{
           {70, {9, 130}}, {4096, {5, 40}}, {4096, {1, 40}}, {70, {20, 130}}, {70, {40, 130}}, {64, {20, 3072}}})
    for (const char* bias : {"true", "false"}) {
      const std::string keys = "num_output: " + std::to_string(outputs) + ", bias: " + bias + "}";
      std::vector<Tensor> dnnl_dx;
      for (bool overwrite_dx : {false, true}) {
        const std::string what = keys + " on batch " + std::to_string(in_shape[0]) +
                                 (overwrite_dx ? ", input gradient overwritten" : ", input gradient added");
        const Outputs blas =
            run_layer("{name: f, type: fc, engine: blas, " + keys, in_shape, Precision::fp32, 0.5f, overwrite_dx);
        const Outputs dnnl = run_layer("{name: f, type: fc, " + keys, in_shape, Precision::fp32, 0.5f, overwrite_dx);
        EXPECT_LE(norm_relative_error(dnnl.y, blas.y), 1e-5) << what;
        EXPECT_LE(norm_relative_error(dnnl.dx, blas.dx), 1e-5) << what;
        for (size_t k = 0; k < blas.param_grads.size(); ++k)
          EXPECT_LE(norm_relative_error(dnnl.param_grads[k], blas.param_grads[k]), 1e-5) << what << ", param " << k;
        dnnl_dx.push_back(dnnl.dx);
      }
      // Added and overwritten differ by the start, so both modes really ran.
      for (int64_t i = 0; i < dnnl_dx[0].numel(); ++i)
        ASSERT_NEAR(dnnl_dx[0][i] - dnnl_dx[1][i], 0.5f, 1e-4f * (1.f + std::abs(dnnl_dx[1][i]))) << keys << ", " << i;
    }
}

#endif  // POSEIDON_HAVE_DNNL

TEST(Bf16DotRate, MeasuredWhereTheCpuHasTheInstruction) {
  const double rate = bf16_dot_rate();
#if defined(__x86_64__) && defined(__GNUC__)
  if (!__builtin_cpu_supports("avx512bf16")) {
    EXPECT_EQ(rate, 0.0);
    return;
  }
#endif
  if (rate == 0.0) GTEST_SKIP() << "no avx512_bf16 on this CPU";
  // Twice the products per instruction, issued at a quarter to twice the
  // rate of the FMAs: a loop the compiler dropped or a clock misread lands
  // far outside.
  EXPECT_GT(rate, 0.2);
  EXPECT_LT(rate, 8.0);
}

#ifdef POSEIDON_HAVE_DNNL
// POSEIDON_CPU_BF16_KERNELS overrides the measured choice; anything but its
// two values is refused with the values it takes.
TEST(Bf16DotRate, EnvironmentChoosesTheKernels) {
  const char* before = std::getenv("POSEIDON_CPU_BF16_KERNELS");
  const std::string saved = before ? before : "";
  setenv("POSEIDON_CPU_BF16_KERNELS", "float32", 1);
  EXPECT_FALSE(dnnl_runs_bf16_kernels());
  setenv("POSEIDON_CPU_BF16_KERNELS", "onednn", 1);
  EXPECT_EQ(dnnl_runs_bf16_kernels(), dnnl_uses_avx512());
  setenv("POSEIDON_CPU_BF16_KERNELS", "amx", 1);
  try {
    dnnl_runs_bf16_kernels();
    ADD_FAILURE() << "POSEIDON_CPU_BF16_KERNELS=amx was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected onednn or float32"), std::string::npos) << e.what();
  }
  if (before)
    setenv("POSEIDON_CPU_BF16_KERNELS", saved.c_str(), 1);
  else
    unsetenv("POSEIDON_CPU_BF16_KERNELS");
}

// An adopted choice (rank 0's, in a job) decides over the environment, and
// dropping it hands the choice back.
TEST(Bf16DotRate, AnAdoptedChoiceDecidesOverTheEnvironment) {
  const char* before = std::getenv("POSEIDON_CPU_BF16_KERNELS");
  const std::string saved = before ? before : "";
  setenv("POSEIDON_CPU_BF16_KERNELS", "onednn", 1);
  adopt_cpu_bf16_kernels(false);
  EXPECT_FALSE(dnnl_runs_bf16_kernels());
  EXPECT_NE(cpu_bf16_kernels().find("rank 0's choice"), std::string::npos) << cpu_bf16_kernels();
  setenv("POSEIDON_CPU_BF16_KERNELS", "float32", 1);
  adopt_cpu_bf16_kernels(true);
  EXPECT_EQ(dnnl_runs_bf16_kernels(), dnnl_uses_avx512());
  adopt_cpu_bf16_kernels(std::nullopt);
  EXPECT_FALSE(dnnl_runs_bf16_kernels());
  if (before)
    setenv("POSEIDON_CPU_BF16_KERNELS", saved.c_str(), 1);
  else
    unsetenv("POSEIDON_CPU_BF16_KERNELS");
}
#endif  // POSEIDON_HAVE_DNNL

TEST(Bf16Layers, NetHandsBf16ToConvAndFcOnly) {
  Net net(ConfigNode::parse(R"(name: small
inputs: {data: [1, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, num_output: 4, kernel_size: 3}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, mode: max, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)",
                            "small.yaml"),
          2);
  net.set_precision(Precision::bf16);
  EXPECT_EQ(net.precision(), Precision::bf16);
  // Where oneDNN has no bfloat16 kernels, conv and fc round their operands
  // for its float32 kernels: bf16 all the same.
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const bool reduced = net.layer(i).type() == "conv" || net.layer(i).type() == "fc";
    EXPECT_EQ(net.layer(i).precision(), reduced ? Precision::bf16 : Precision::fp32) << net.layer(i).name();
  }
  EXPECT_THROW(net.set_precision(Precision::tf32), Error);  // a GPU precision
  net.set_precision(Precision::fp32);
  for (size_t i = 0; i < net.num_layers(); ++i) EXPECT_EQ(net.layer(i).precision(), Precision::fp32);
}

}  // namespace
}  // namespace poseidon::testing
