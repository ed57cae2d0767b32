// Concat: gradient cases on two axes, element placement and shape errors.
#include <gtest/gtest.h>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("concat_axis1", "{name: cat, type: concat}", {{2, 3, 2}, {2, 1, 2}});
GRAD_CASE("concat_axis2", "{name: cat, type: concat, axis: 2}", {{2, 3, 2}, {2, 3, 4}, {2, 3, 1}});
GRAD_CASE("concat_axis_last", "{name: cat, type: concat, axis: -1}", {{2, 2}, {2, 3}});

namespace {
std::unique_ptr<Layer> make_concat(const std::string& yaml) {
  return LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
}
}  // namespace

TEST(Concat, PlacesEachInputAlongTheAxis) {
  auto layer = make_concat("{name: cat, type: concat, axis: 1}");
  Tensor a({2, 2, 3}), b({2, 1, 3});
  for (int64_t i = 0; i < a.numel(); ++i) a[i] = static_cast<float>(i);
  for (int64_t i = 0; i < b.numel(); ++i) b[i] = 100.f + i;
  auto shapes = layer->reshape({a.shape(), b.shape()});
  ASSERT_EQ(shapes.at(0), (Shape{2, 3, 3}));
  Tensor y(shapes[0]);
  LayerIO io{{&a, &b}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t w = 0; w < 3; ++w) {
        const float expected = c < 2 ? a[(n * 2 + c) * 3 + w] : b[n * 3 + w];
        EXPECT_EQ(y[(n * 3 + c) * 3 + w], expected) << n << "," << c << "," << w;
      }
}

TEST(Concat, BackwardSplitsTheGradientAndSkipsNullInputs) {
  auto layer = make_concat("{name: cat, type: concat}");
  Tensor a({2, 1}), b({2, 2}), y({2, 3}), dy({2, 3}), da({2, 1});
  layer->reshape({a.shape(), b.shape()});
  for (int64_t i = 0; i < dy.numel(); ++i) dy[i] = static_cast<float>(i + 1);
  da.fill(10.f);
  LayerIO io{{&a, &b}, {&y}, {&dy}, {&da, nullptr}};
  RunContext ctx;
  layer->backward(io, ctx);
  EXPECT_EQ(da[0], 11.f);  // dy[0, 0] added to what was there
  EXPECT_EQ(da[1], 14.f);  // dy[1, 0]
}

TEST(Concat, ShapeMismatchNamesTheLayer) {
  auto layer = make_concat("{name: joiner, type: concat, axis: 1}");
  try {
    layer->reshape({{2, 3, 4}, {2, 2, 5}});
    FAIL() << "mismatched shapes were accepted";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("joiner"), std::string::npos) << what;
    EXPECT_NE(what.find("[2, 2, 5]"), std::string::npos) << what;
  }
  EXPECT_THROW(layer->reshape({{2, 3}, {2, 3, 1}}), ConfigError);
}

TEST(Concat, RejectsAxisOutOfRange) {
  auto layer = make_concat("{name: cat, type: concat, axis: 3}");
  EXPECT_THROW(layer->reshape({{2, 3, 4}, {2, 3, 4}}), ConfigError);
}

TEST(Concat, TakesTwoOrMoreInputs) {
  auto layer = make_concat("{name: cat, type: concat}");
  EXPECT_EQ(layer->input_count(), (std::pair<int, int>{2, -1}));
}

}  // namespace poseidon::testing
