// The element-wise activations (sigmoid, tanh, gelu, leaky_relu): gradient
// cases, values at points known in closed form, and their keys' checks.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("sigmoid", "{name: a, type: sigmoid}", {{2, 3, 4, 5}});
GRAD_CASE("tanh", "{name: a, type: tanh}", {{2, 3, 4, 5}});
GRAD_CASE("gelu_exact", "{name: a, type: gelu}", {{2, 3, 4, 5}});
GRAD_CASE("gelu_tanh", "{name: a, type: gelu, approximate: tanh}", {{2, 3, 4, 5}});
GRAD_CASE("leaky_relu", "{name: a, type: leaky_relu, negative_slope: 0.2}", {{2, 3, 4, 5}});

namespace {

// The layer's outputs for `inputs`.
std::vector<float> forward(const std::string& yaml, const std::vector<float>& inputs) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  const Shape shape = {static_cast<int64_t>(inputs.size())};
  layer->reshape({shape});
  Tensor x(shape), y(shape);
  std::copy(inputs.begin(), inputs.end(), x.data());
  LayerIO io{{&x}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  return {y.data(), y.data() + y.numel()};
}

}  // namespace

TEST(Activations, ValuesAtKnownPoints) {
  const std::vector<float> sig = forward("{name: a, type: sigmoid}", {0.f, 2.f, -100.f});
  EXPECT_FLOAT_EQ(sig[0], 0.5f);
  EXPECT_FLOAT_EQ(sig[1], 1.f / (1.f + std::exp(-2.f)));
  EXPECT_EQ(sig[2], 0.f);  // no NaN far out
  const std::vector<float> th = forward("{name: a, type: tanh}", {0.f, 1.f, 30.f});
  EXPECT_EQ(th[0], 0.f);
  EXPECT_FLOAT_EQ(th[1], std::tanh(1.f));
  EXPECT_EQ(th[2], 1.f);
  // GELU(1) = Phi(1) = 0.841344746...; the tanh form gives 0.841191990...
  EXPECT_NEAR(forward("{name: a, type: gelu}", {1.f})[0], 0.8413447461, 1e-6);
  EXPECT_NEAR(forward("{name: a, type: gelu, approximate: tanh}", {1.f})[0], 0.8411919906, 1e-6);
  EXPECT_NEAR(forward("{name: a, type: gelu}", {-3.f})[0], -3 * 0.0013498980, 1e-6);
  const std::vector<float> leaky = forward("{name: a, type: leaky_relu}", {-2.f, 0.f, 3.f});
  EXPECT_FLOAT_EQ(leaky[0], -0.02f);
  EXPECT_EQ(leaky[1], 0.f);
  EXPECT_EQ(leaky[2], 3.f);
}

TEST(Activations, BackwardAddsIntoTheInputGradient) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: a, type: sigmoid}", "test"));
  layer->reshape({{2}});
  Tensor x({2}), y({2}), dy({2}), dx({2});
  x[0] = 0.f, x[1] = 1.f, dy[0] = 2.f, dy[1] = -1.f, dx[0] = 10.f, dx[1] = 20.f;
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  EXPECT_FLOAT_EQ(dx[0], 10.f + 2.f * 0.25f);
  EXPECT_FLOAT_EQ(dx[1], 20.f - y[1] * (1.f - y[1]));
}

TEST(Activations, GeluApproximationMustBeNoneOrTanh) {
  try {
    LayerRegistry::instance().create(ConfigNode::parse("{name: g, type: gelu, approximate: erf}", "test"));
    FAIL() << "approximate: erf was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("approximate"), std::string::npos) << e.what();
  }
}

}  // namespace poseidon::testing
