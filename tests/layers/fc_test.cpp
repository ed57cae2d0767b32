// Fully connected: gradient cases, and forward and backward checked against
// direct loops over Y[n][o] = sum_k X[n][k] W[o][k] + b[o].
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("fc", "{name: f, type: fc, num_output: 3}", {{2, 5}});
GRAD_CASE("fc_flattens_nchw", "{name: f, type: fc, num_output: 4}", {{2, 3, 2, 2}});
GRAD_CASE("fc_no_bias", "{name: f, type: fc, num_output: 2, bias: false}", {{3, 4}});
// With a ReLU fused (core/relu_fusion.h), through oneDNN and through BLAS.
GRAD_CASE(.name = "fc_relu_fused", .yaml = "{name: f, type: fc, num_output: 4}", .inputs = {{3, 5}}, .fuse_relu = true);
GRAD_CASE(.name = "fc_blas_relu_fused", .yaml = "{name: f, type: fc, num_output: 4, engine: blas}", .inputs = {{3, 5}},
          .fuse_relu = true);

namespace {

std::unique_ptr<Layer> make_fc(const std::string& yaml) {
  return LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
}

void fill_uniform(Tensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = uni(rng);
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int reported = 0;
  for (int64_t i = 0; i < got.numel(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-4 * (1 + std::abs(want[i])) && reported++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
}

// Forward and backward of an fc layer of `out` outputs on a
// [batch, channels, 3, 4] input against direct loops in double.
void expect_matches_direct_loops(int64_t batch, int64_t out, bool bias, int64_t channels = 2) {
  const int64_t features = channels * 3 * 4;
  const std::string what = "batch " + std::to_string(batch) + ", " + std::to_string(features) + " features, " +
                           std::to_string(out) + " outputs" + (bias ? "" : ", no bias");
  auto layer =
      make_fc("{name: f, type: fc, num_output: " + std::to_string(out) + ", bias: " + (bias ? "true" : "false") + "}");
  std::vector<Shape> shapes = layer->reshape({{batch, channels, 3, 4}});
  ASSERT_EQ(shapes.at(0), (Shape{batch, out})) << what;
  std::mt19937_64 rng(5);
  for (auto& p : layer->params()) {
    p.value = Tensor(p.shape);
    p.grad = Tensor(p.shape);
    p.grad.fill(7.f);  // overwritten by backward
    fill_uniform(p.value, rng);
  }
  const Tensor& w = layer->param(0).value;
  Tensor x({batch, channels, 3, 4}), y({batch, out}), dy({batch, out}), dx({batch, channels, 3, 4});
  fill_uniform(x, rng);
  fill_uniform(dy, rng);
  dx.fill(-0.25f);  // input gradients accumulate

  std::vector<double> want_y(batch * out), want_dx(batch * features, -0.25), want_dw(out * features, 0.0),
      want_db(out, 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias ? layer->param(1).value[o] : 0.0;
      for (int64_t k = 0; k < features; ++k) {
        sum += double(x[n * features + k]) * w[o * features + k];
        want_dx[n * features + k] += double(dy[n * out + o]) * w[o * features + k];
        want_dw[o * features + k] += double(dy[n * out + o]) * x[n * features + k];
      }
      want_y[n * out + o] = sum;
      want_db[o] += dy[n * out + o];
    }

  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  expect_near_all(y, want_y, what + ": output");
  expect_near_all(dx, want_dx, what + ": input grad");
  expect_near_all(layer->param(0).grad, want_dw, what + ": weight grad");
  if (bias) expect_near_all(layer->param(1).grad, want_db, what + ": bias grad");
}

TEST(Fc, ForwardAndBackwardMatchDirectLoops) {
  expect_matches_direct_loops(3, 5, true);
  expect_matches_direct_loops(1, 5, true);
  // 4096 outputs and more: in float32 the backward products read dy from a
  // column-major copy (layers/fc_dnnl.cpp), with and without bias; at batch 1
  // dy is read in place.
  expect_matches_direct_loops(4, 4096, true);
  expect_matches_direct_loops(3, 4500, false);
  expect_matches_direct_loops(1, 4096, true);
  // 2^25 multiply-adds and 512 outputs or more: in float32 on a CPU where
  // oneDNN stops at AVX2, dx comes from BLAS (layers/fc_dnnl.cpp).
  expect_matches_direct_loops(16, 2048, true, 86);
}

TEST(Fc, ParametersFollowPyTorchLayoutAndFanIn) {
  auto layer = make_fc("{name: f, type: fc, num_output: 10}");
  layer->reshape({{4, 3, 2, 2}});
  ASSERT_EQ(layer->params().size(), 2u);
  EXPECT_EQ(layer->param(0).name, "f.weight");
  EXPECT_EQ(layer->param(0).shape, (Shape{10, 12}));
  EXPECT_EQ(layer->param(0).init.fan_in, 12);
  EXPECT_EQ(layer->param(1).name, "f.bias");
  EXPECT_EQ(layer->param(1).shape, (Shape{10}));
  EXPECT_EQ(layer->forward_flops({{4, 3, 2, 2}}), 2 * 4 * 12 * 10);
}

TEST(Fc, RejectsBadConfigsNamingTheKey) {
  for (const char* yaml :
       {"{name: f, type: fc}", "{name: f, type: fc, num_output: 0}", "{name: f, type: fc, num_output: many}"}) {
    try {
      make_fc(yaml);
      ADD_FAILURE() << "accepted " << yaml;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("num_output"), std::string::npos) << e.what();
    }
  }
}

TEST(Fc, ChangingFeatureCountIsAnError) {
  auto layer = make_fc("{name: f, type: fc, num_output: 3}");
  layer->reshape({{2, 6}});
  EXPECT_NO_THROW(layer->reshape({{7, 2, 3}}));  // same features, other batch
  EXPECT_THROW(layer->reshape({{2, 5}}), Error);
}

}  // namespace
}  // namespace poseidon::testing
