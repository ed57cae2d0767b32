// Batch norm on bfloat16 blobs on the CPU (layers/batch_norm.h): it computes
// in float32 inside, as autocast's does, so on values that bfloat16 holds
// exactly its output and input gradient are the float32 layer's rounded
// once, and its weight and bias gradients and running statistics are the
// float32 layer's bit for bit: in training and test phases, with and
// without a fused ReLU, adding into an input gradient or overwriting it.
// A layer that rounded its statistics or an intermediate, read the 16 bits
// wrongly or lost the old input gradient differs.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "core/bf16.h"
#include "core/blob_types.h"
#include "core/registry.h"
#include "core/relu_fusion.h"

namespace poseidon::testing {
namespace {

struct Case {
  Shape shape;
  Phase phase;
  bool relu, overwrite;
};

struct Result {
  Tensor y, dx;
  std::vector<Tensor> params, grads;  // values (running statistics updated) and gradients
};

// One forward and backward of a batch norm whose blobs hold `type`, from
// the same draws whatever the type.
Result run(const Case& c, DType type) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: bn, type: batch_norm}", "t.yaml"));
  if (c.relu) EXPECT_TRUE(dynamic_cast<ReluFusable&>(*layer).fuse_relu());
  layer->reshape({c.shape});
  std::mt19937_64 rng(29);
  for (Param& p : layer->params()) {
    // Running variances must be positive for the test phase.
    p.value = bf16_exact(p.shape, rng, p.name == "running_var" ? 4.f : 0.f);
    p.grad = Tensor(p.shape);
  }
  const Tensor x32 = bf16_exact(c.shape, rng, 0.5f), dy32 = bf16_exact(c.shape, rng), dx32 = bf16_exact(c.shape, rng);
  Tensor x = x32.to(type), y(c.shape, Device{}, type), dy = dy32.to(type), dx = dx32.to(type);
  LayerIO io;
  io.in = {&x};
  io.in_grad = {&dx};
  io.out = {&y};
  io.out_grad = {&dy};
  io.in_grad_unset = {c.overwrite};
  RunContext ctx{c.phase, &rng, {}};
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  Result r{y, dx, {}, {}};
  for (const Param& p : layer->params()) r.params.push_back(p.value), r.grads.push_back(p.grad);
  return r;
}

int64_t differing_words(const Tensor& bf16, const Tensor& f32) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < f32.numel(); ++i) wrong += bf16.bf16_data()[i] != to_bf16(f32[i]);
  return wrong;
}

int64_t differing_floats(const Tensor& a, const Tensor& b) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < b.numel(); ++i) wrong += float_bits(a[i]) != float_bits(b[i]);
  return wrong;
}

TEST(Bf16BatchNorm, ComputesInFloat32AndRoundsEachOutputOnce) {
  std::vector<Case> cases;
  // Planes of 99, 9 and 1 values, and of 323: rows that the bfloat16 passes
  // write in more than one 256-value piece, the last one partial.
  for (const Shape& shape : {Shape{4, 6, 9, 11}, Shape{2, 40, 3, 3}, Shape{64, 24}, Shape{2, 3, 17, 19}})
    for (Phase phase : {Phase::train, Phase::test})
      for (bool relu : {false, true})
        for (bool overwrite : {false, true}) cases.push_back({shape, phase, relu, overwrite});
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_str(c.shape) + (c.phase == Phase::train ? " train" : " test") + (c.relu ? " relu" : "") +
                 (c.overwrite ? " dx overwritten" : " dx added to"));
    const Result f32 = run(c, DType::f32), bf16 = run(c, DType::bf16);
    ASSERT_EQ(bf16.y.dtype(), DType::bf16);
    ASSERT_EQ(bf16.dx.dtype(), DType::bf16);
    EXPECT_EQ(differing_words(bf16.y, f32.y), 0) << "output";
    EXPECT_EQ(differing_words(bf16.dx, f32.dx), 0) << "input gradient";
    for (size_t k = 0; k < f32.params.size(); ++k) {
      EXPECT_EQ(differing_floats(bf16.params[k], f32.params[k]), 0) << "parameter " << k;
      EXPECT_EQ(differing_floats(bf16.grads[k], f32.grads[k]), 0) << "gradient of parameter " << k;
    }
  }
}

// The layer reads and writes bfloat16 where its input is bfloat16, unless
// its own `precision: fp32` keeps it on float32 blobs.
TEST(Bf16BatchNorm, ReadsBfloat16InputsAsTheyAreUnlessKeptInFloat32) {
  auto declared = [](const std::string& yaml, DType in) {
    auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"));
    layer->set_precision(Precision::bf16);
    const auto& typed = dynamic_cast<const BlobTypes&>(*layer);
    return typed.writes(typed.reads({in}));
  };
  EXPECT_EQ(declared("{name: bn, type: batch_norm}", DType::bf16), DType::bf16);
  EXPECT_EQ(declared("{name: bn, type: batch_norm}", DType::f32), DType::f32);
  EXPECT_EQ(declared("{name: bn, type: batch_norm, precision: fp32}", DType::bf16), DType::f32);
}

}  // namespace
}  // namespace poseidon::testing
