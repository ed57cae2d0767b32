// Accuracy: top-1 and top-2 on a crafted batch, the metric contract, errors.
#include <gtest/gtest.h>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

// Not differentiable: the case checks that nothing leaks into the gradients.
GRAD_CASE("accuracy", "{name: acc, type: accuracy}", {{4, 5}, {4}}, {0, 5});

namespace {
float accuracy(const std::string& yaml) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  // Sample 0: label is the best class; 1: second best; 2: third; 3: worst.
  Tensor logits({4, 4}), labels({4}), out(Shape{});
  const float x[] = {0.9f, 0.1f, 0.3f, 0.2f,  //
                     0.1f, 0.5f, 0.7f, 0.2f,  //
                     0.3f, 0.4f, 0.2f, 0.6f,  //
                     -1.f, 2.f,  1.f,  0.5f};
  const float y[] = {0, 1, 0, 0};
  std::copy(x, x + 16, logits.data());
  std::copy(y, y + 4, labels.data());
  EXPECT_EQ(layer->reshape({logits.shape(), labels.shape()}).at(0), Shape{});
  LayerIO io{{&logits, &labels}, {&out}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  return out[0];
}
}  // namespace

TEST(Accuracy, TopOneAndTopTwo) {
  EXPECT_FLOAT_EQ(accuracy("{name: acc, type: accuracy}"), 0.25f);
  EXPECT_FLOAT_EQ(accuracy("{name: acc, type: accuracy, top_k: 2}"), 0.5f);
  EXPECT_FLOAT_EQ(accuracy("{name: acc, type: accuracy, top_k: 3}"), 0.75f);
  EXPECT_FLOAT_EQ(accuracy("{name: acc, type: accuracy, top_k: 4}"), 1.f);
}

TEST(Accuracy, IsAMetricNotALoss) {
  auto layer =
      LayerRegistry::instance().create(ConfigNode::parse("{name: acc, type: accuracy}", "t"));
  EXPECT_FALSE(layer->differentiable());
  EXPECT_EQ(layer->loss_weight(), 0.f);
  EXPECT_EQ(layer->input_count(), (std::pair<int, int>{2, 2}));
}

TEST(Accuracy, RejectsTopKBeyondTheClassesAndBadLabels) {
  EXPECT_THROW(accuracy("{name: acc, type: accuracy, top_k: 5}"), ConfigError);
  EXPECT_THROW(accuracy("{name: acc, type: accuracy, top_k: 0}"), ConfigError);
  auto layer =
      LayerRegistry::instance().create(ConfigNode::parse("{name: acc, type: accuracy}", "t"));
  Tensor logits({1, 3}), labels({1}), out(Shape{});
  labels[0] = 3.f;
  layer->reshape({logits.shape(), labels.shape()});
  LayerIO io{{&logits, &labels}, {&out}, {}, {}};
  RunContext ctx;
  EXPECT_THROW(layer->forward(io, ctx), Error);
}

}  // namespace poseidon::testing
