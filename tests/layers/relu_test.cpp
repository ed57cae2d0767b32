// ReLU: forward values, its gradient case and both directions on large inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("relu", "{name: r, type: relu}", {{2, 3, 4, 5}});

TEST(Relu, ClampsNegatives) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: r, type: relu}", "t"));
  Tensor x({4}), y({4});
  float v[] = {-2.f, -0.f, 0.5f, 3.f};
  std::copy(v, v + 4, x.data());
  LayerIO io{{&x}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 0.5f);
  EXPECT_EQ(y[3], 3.f);
}

// Sizes below and above the threading threshold, neither a multiple of a
// vector width nor of the chunks the threads share.
TEST(Relu, ForwardAndBackwardMatchDefinitionOnLargeInputs) {
  for (const Shape& shape : {Shape{3, 5, 37, 41}, Shape{2, 3, 99, 101}}) {
    auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: r, type: relu}", "t"));
    Tensor x(shape), y(shape), dy(shape), dx(shape);
    for (int64_t i = 0; i < x.numel(); ++i) x[i] = std::sin(0.37f * i), dy[i] = std::cos(0.11f * i);
    dx.fill(0.25f);  // input gradients accumulate
    LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
    RunContext ctx;
    layer->forward(io, ctx);
    layer->backward(io, ctx);
    for (int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_EQ(y[i], x[i] > 0.f ? x[i] : 0.f) << i;
      ASSERT_EQ(dx[i], 0.25f + (x[i] > 0.f ? dy[i] : 0.f)) << i;
    }
  }
}

}  // namespace poseidon::testing
