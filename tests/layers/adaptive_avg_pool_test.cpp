// Adaptive average pooling: gradient cases (overlapping windows, replication
// of a smaller input, windows of one input each), forward values from
// PyTorch's window formula, and backward of a replicated input on a batch
// large enough for the threads.
#include <gtest/gtest.h>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("adaptive_avg_pool_overlap", "{name: p, type: adaptive_avg_pool, output_size: [3, 2]}", {{2, 2, 5, 7}});
GRAD_CASE("adaptive_avg_pool_upsample", "{name: p, type: adaptive_avg_pool, output_size: [4, 5]}", {{1, 3, 2, 3}});
// Every window one input wide: 1x1 replicated to 7x7, 2x3 doubled to 4x6.
GRAD_CASE("adaptive_avg_pool_replicate", "{name: p, type: adaptive_avg_pool, output_size: 7}", {{2, 3, 1, 1}});
GRAD_CASE("adaptive_avg_pool_double", "{name: p, type: adaptive_avg_pool, output_size: [4, 6]}", {{1, 2, 2, 3}});
GRAD_CASE("adaptive_avg_pool_global", "{name: p, type: adaptive_avg_pool, output_size: 1}", {{2, 3, 4, 4}});

namespace {
Tensor pool(const std::string& yaml, const Tensor& x) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t"));
  Tensor y(layer->reshape({x.shape()})[0]);
  LayerIO io{{&x}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  return y;
}
}  // namespace

TEST(AdaptiveAvgPool, WindowsFollowPyTorch) {
  // One row of 5 pooled to 3: windows [0, 2), [1, 4), [3, 5) overlap.
  Tensor x({1, 1, 1, 5});
  for (int64_t i = 0; i < 5; ++i) x[i] = static_cast<float>(1 << i);  // 1 2 4 8 16
  Tensor y = pool("{name: p, type: adaptive_avg_pool, output_size: [1, 3]}", x);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 1, 3}));
  EXPECT_FLOAT_EQ(y[0], (1.f + 2.f) / 2.f);
  EXPECT_FLOAT_EQ(y[1], (2.f + 4.f + 8.f) / 3.f);
  EXPECT_FLOAT_EQ(y[2], (8.f + 16.f) / 2.f);
}

TEST(AdaptiveAvgPool, ReplicatesASmallerInputAndKeepsAnEqualOne) {
  Tensor one({2, 1, 1, 1});
  one[0] = 3.f;
  one[1] = -2.f;
  Tensor up = pool("{name: p, type: adaptive_avg_pool, output_size: 7}", one);
  ASSERT_EQ(up.shape(), (Shape{2, 1, 7, 7}));
  for (int64_t i = 0; i < 49; ++i) {
    EXPECT_EQ(up[i], 3.f);
    EXPECT_EQ(up[49 + i], -2.f);
  }
  Tensor x({1, 2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 0.5f * static_cast<float>(i) - 3.f;
  Tensor same = pool("{name: p, type: adaptive_avg_pool, output_size: [3, 4]}", x);
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(same[i], x[i]);
}

// VGG's 1x1 features replicated to 7x7 at batch 32 (16,384 planes): each
// input's gradient is the sum of its 49 cells' gradients, added in order.
TEST(AdaptiveAvgPool, ReplicatedInputGathersItsCellsGradients) {
  auto layer = LayerRegistry::instance().create(
      ConfigNode::parse("{name: p, type: adaptive_avg_pool, output_size: 7}", "t"));
  Tensor x({32, 512, 1, 1}), dx(x.shape());
  Tensor y(layer->reshape({x.shape()})[0]), dy(y.shape());
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = 0.25f * static_cast<float>(i % 13) - 1.f;
  for (int64_t i = 0; i < dy.numel(); ++i) dy[i] = 0.125f * static_cast<float>(i % 11) - 0.5f;
  dx.fill(1.f);
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  for (int64_t p = 0; p < x.numel(); ++p) {
    float want = 1.f;
    for (int64_t o = 0; o < 49; ++o) {
      ASSERT_EQ(y[p * 49 + o], x[p]) << p;
      want += dy[p * 49 + o];
    }
    ASSERT_EQ(dx[p], want) << p;
  }
}

TEST(AdaptiveAvgPool, RequiresAPositiveOutputSize) {
  EXPECT_THROW(LayerRegistry::instance().create(ConfigNode::parse("{name: p, type: adaptive_avg_pool}", "t")),
               ConfigError);
  EXPECT_THROW(
      LayerRegistry::instance().create(ConfigNode::parse("{name: p, type: adaptive_avg_pool, output_size: 0}", "t")),
      ConfigError);
}

}  // namespace poseidon::testing
