// A CPU layer standing in a GPU net (HostFallbackLayer) computes in the
// precision the Net gives it: bf16 where the CPU layer has a path for it,
// float32 where its own `precision` key says so. The wrapper's copies run
// on the CPU here as they would around a GPU net, so no GPU is needed.
#include <gtest/gtest.h>

#include "core/host_fallback_layer.h"
#include "core/registry.h"
#include "seeded_fill.h"

namespace poseidon {
namespace {

struct Result {
  Precision precision;
  Tensor y, dx;
  std::vector<Tensor> param_grads;
};

// Forward and backward of the layer `yaml` on a [4, 24] input at the run
// precision `run`, alone or wrapped; the same seed draws every value.
Result run(const std::string& yaml, Precision run, bool wrapped) {
  const ConfigNode config = ConfigNode::parse(yaml, "model.yaml");
  std::unique_ptr<Layer> layer = LayerRegistry::instance().create(config);
  if (wrapped) layer = std::make_unique<HostFallbackLayer>(config, std::move(layer));
  layer->set_precision(run);
  const Shape in_shape{4, 24};
  const Shape out_shape = layer->reshape({in_shape}).at(0);
  testing::SeededFill values(5);
  values.fill_params(*layer);
  Result r{layer->precision(), Tensor(out_shape), Tensor(in_shape), {}};
  Tensor x(in_shape), dy(out_shape);
  values.fill(x);
  values.fill(dy);
  LayerIO io{{&x}, {&r.y}, {&dy}, {&r.dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  for (Param& p : layer->params()) r.param_grads.push_back(p.grad);
  return r;
}

std::vector<float> values(const Tensor& t) { return {t.data(), t.data() + t.numel()}; }

void expect_same(const Result& got, const Result& want) {
  EXPECT_EQ(got.precision, want.precision);
  EXPECT_EQ(values(got.y), values(want.y));
  EXPECT_EQ(values(got.dx), values(want.dx));
  ASSERT_EQ(got.param_grads.size(), want.param_grads.size());
  for (size_t k = 0; k < want.param_grads.size(); ++k)
    EXPECT_EQ(values(got.param_grads[k]), values(want.param_grads[k])) << "parameter " << k;
}

TEST(HostFallbackPrecision, ACpuLayerWrappedComputesInTheRunsBf16) {
  const std::string fc = "{name: fc1, type: fc, num_output: 6}";
  const Result wrapped = run(fc, Precision::bf16, true);
  EXPECT_EQ(wrapped.precision, Precision::bf16);
  expect_same(wrapped, run(fc, Precision::bf16, false));
  // And bf16 really ran: float32's output is another.
  EXPECT_NE(values(wrapped.y), values(run(fc, Precision::fp32, false).y));
}

TEST(HostFallbackPrecision, ItsOwnPrecisionKeyKeepsItInFloat32) {
  const std::string fc = "{name: fc1, type: fc, num_output: 6, precision: fp32}";
  const Result wrapped = run(fc, Precision::bf16, true);
  EXPECT_EQ(wrapped.precision, Precision::fp32);
  expect_same(wrapped, run(fc, Precision::fp32, false));
}

TEST(HostFallbackPrecision, ALayerWithoutBf16StaysFloat32) {
  const std::string relu = "{name: act, type: relu}";
  const Result wrapped = run(relu, Precision::bf16, true);
  EXPECT_EQ(wrapped.precision, Precision::fp32);
  expect_same(wrapped, run(relu, Precision::fp32, false));
}

}  // namespace
}  // namespace poseidon
