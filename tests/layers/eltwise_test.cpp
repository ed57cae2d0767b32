// Eltwise: gradient cases for products of two and three inputs and a
// maximum, the maximum's routing of gradients (ties included), values, and
// the checks of shapes and keys.
#include <gtest/gtest.h>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("eltwise_prod", "{name: e, type: eltwise}", {{2, 3, 4}, {2, 3, 4}});
GRAD_CASE("eltwise_prod_three", "{name: e, type: eltwise, operation: prod}", {{3, 5}, {3, 5}, {3, 5}});
// The checker draws every input from one set of values, so two inputs could
// tie, where the maximum has no derivative; against integer labels (0 or 1)
// the inputs, odd multiples of 0.02, never come within a step of a tie.
GRAD_CASE("eltwise_max", "{name: e, type: eltwise, operation: max}", {{2, 3, 4}, {2, 3, 4}}, {0, 2});

namespace {

struct EltwiseRun {
  std::vector<Tensor> in, in_grad;
  Tensor out, out_grad;
};

// Forward and backward of `yaml` on inputs given per element, dy = 1, 2, 3, ...
EltwiseRun run(const std::string& yaml, const std::vector<std::vector<float>>& inputs) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  const Shape shape = {static_cast<int64_t>(inputs[0].size())};
  layer->reshape(std::vector<Shape>(inputs.size(), shape));
  EltwiseRun r{{}, {}, Tensor(shape), Tensor(shape)};
  LayerIO io;
  for (const auto& values : inputs) {
    r.in.emplace_back(shape);
    std::copy(values.begin(), values.end(), r.in.back().data());
    r.in_grad.emplace_back(shape);
  }
  for (size_t k = 0; k < inputs.size(); ++k) io.in.push_back(&r.in[k]), io.in_grad.push_back(&r.in_grad[k]);
  for (int64_t i = 0; i < shape[0]; ++i) r.out_grad[i] = 1.f + i;
  io.out = {&r.out};
  io.out_grad = {&r.out_grad};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  return r;
}

}  // namespace

TEST(Eltwise, MaxRoutesEachGradientToTheFirstMaximum) {
  EltwiseRun r = run("{name: e, type: eltwise, operation: max}", {{1, 5, 2, 7}, {3, 5, 2, -1}, {0, 4, 9, 7}});
  EXPECT_EQ(std::vector<float>(r.out.data(), r.out.data() + 4), (std::vector<float>{3, 5, 9, 7}));
  EXPECT_EQ(std::vector<float>(r.in_grad[0].data(), r.in_grad[0].data() + 4), (std::vector<float>{0, 2, 0, 4}));
  EXPECT_EQ(std::vector<float>(r.in_grad[1].data(), r.in_grad[1].data() + 4), (std::vector<float>{1, 0, 0, 0}));
  EXPECT_EQ(std::vector<float>(r.in_grad[2].data(), r.in_grad[2].data() + 4), (std::vector<float>{0, 0, 3, 0}));
}

TEST(Eltwise, ProductGradientIsTheProductOfTheOthers) {
  EltwiseRun r = run("{name: e, type: eltwise}", {{2, 0, -1}, {3, 4, 0.5f}, {5, 6, 8}});
  EXPECT_EQ(std::vector<float>(r.out.data(), r.out.data() + 3), (std::vector<float>{30, 0, -4}));
  // A zero input still passes the product of the others to itself.
  EXPECT_EQ(std::vector<float>(r.in_grad[0].data(), r.in_grad[0].data() + 3), (std::vector<float>{15, 48, 12}));
  EXPECT_EQ(std::vector<float>(r.in_grad[1].data(), r.in_grad[1].data() + 3), (std::vector<float>{10, 0, -24}));
  EXPECT_EQ(std::vector<float>(r.in_grad[2].data(), r.in_grad[2].data() + 3), (std::vector<float>{6, 0, -1.5f}));
}

TEST(Eltwise, RejectsUnequalShapesAndUnknownOperations) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: gate, type: eltwise}", "t"));
  try {
    layer->reshape({{2, 3}, {3, 2}});
    FAIL() << "unequal shapes were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gate"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LayerRegistry::instance().create(ConfigNode::parse("{name: e, type: eltwise, operation: sum}", "t")),
               ConfigError);
}

}  // namespace poseidon::testing
