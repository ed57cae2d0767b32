// Flatten: gradient cases, output shapes for several axes, and the axis check.
#include <gtest/gtest.h>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("flatten", "{name: f, type: flatten}", {{2, 3, 2, 2}});
GRAD_CASE("flatten_axis2", "{name: f, type: flatten, axis: 2}", {{2, 3, 2, 2}});

namespace {
Shape flattened(const std::string& axis, const Shape& in) {
  auto layer = LayerRegistry::instance().create(
      ConfigNode::parse("{name: f, type: flatten, axis: " + axis + "}", "test"));
  return layer->reshape({in}).at(0);
}
}  // namespace

TEST(Flatten, MergesDimensionsFromTheAxisOn) {
  EXPECT_EQ(flattened("1", {2, 3, 4, 5}), (Shape{2, 60}));
  EXPECT_EQ(flattened("2", {2, 3, 4, 5}), (Shape{2, 3, 20}));
  EXPECT_EQ(flattened("0", {2, 3, 4, 5}), (Shape{120}));
  EXPECT_EQ(flattened("-1", {2, 3, 4, 5}), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(flattened("1", {7, 3}), (Shape{7, 3}));
}

TEST(Flatten, KeepsTheValuesInOrder) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: f, type: flatten}", "t"));
  Tensor x({2, 2, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 0.5f * i - 1.f;
  Tensor y(layer->reshape({x.shape()}).at(0));
  LayerIO io{{&x}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y[i], x[i]) << i;
}

TEST(Flatten, RejectsAxisOutOfRange) {
  EXPECT_THROW(flattened("4", {2, 3, 4, 5}), ConfigError);
  EXPECT_THROW(flattened("-5", {2, 3, 4, 5}), ConfigError);
  EXPECT_THROW(flattened("1", {8}), ConfigError);
}

}  // namespace poseidon::testing
