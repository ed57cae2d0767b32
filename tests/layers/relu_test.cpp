// ReLU: forward values and its gradient case.
#include <gtest/gtest.h>

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

}  // namespace poseidon::testing
