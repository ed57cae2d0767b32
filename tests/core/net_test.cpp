// Net graph: topological order independent of file order, shape inference,
// gradient paths, flat parameter buffers, reshape, and overrides.
#include <gtest/gtest.h>

#include "core/local_sink.h"
#include "core/net.h"

namespace poseidon {

namespace {
ConfigNode parse(const std::string& yaml) { return ConfigNode::parse(yaml, "model.yaml"); }

// Layers listed out of order; a fan-out (fc1 feeds two branches) joined by sum.
const char* kBranchy = R"(name: branchy
inputs: {data: [3], label: []}
layers:
  - {name: loss, type: softmax_loss, inputs: [joined, label]}
  - {name: joined, type: sum, inputs: [a, b]}
  - {name: a, type: fc, inputs: h, num_output: 4}
  - {name: b, type: relu, inputs: h_skip}
  - {name: h_skip, type: fc, inputs: h, num_output: 4}
  - {name: h, type: fc, inputs: data, num_output: 5}
  - {name: acc, type: accuracy, inputs: [joined, label]}
)";

void feed_three_examples(Net& net) {
  for (int64_t i = 0; i < 9; ++i) net.blob("data").value[i] = 0.1f * static_cast<float>(i) - 0.4f;
  for (int64_t i = 0; i < 3; ++i) net.blob("label").value[i] = static_cast<float>(i);
}

struct CountingSink : GradSink {
  std::vector<std::string> order;
  void grad_ready(Param& p) override { order.push_back(p.name); }
};
}  // namespace

TEST(Net, OrdersLayersTopologically) {
  Net net(parse(kBranchy), 2);
  std::vector<std::string> names;
  for (size_t i = 0; i < net.num_layers(); ++i) names.push_back(net.layer(i).name());
  auto pos = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  EXPECT_LT(pos("h"), pos("a"));
  EXPECT_LT(pos("h"), pos("h_skip"));
  EXPECT_LT(pos("h_skip"), pos("b"));
  EXPECT_LT(pos("a"), pos("joined"));
  EXPECT_LT(pos("b"), pos("joined"));
  EXPECT_LT(pos("joined"), pos("loss"));
  EXPECT_EQ(net.blob("joined").value.shape(), (Shape{2, 4}));
  EXPECT_EQ(net.loss_outputs(), std::vector<std::string>{"loss"});
  EXPECT_EQ(net.metric_outputs(), std::vector<std::string>{"acc"});
}

TEST(Net, GradientsReadyInBackwardOrderAndFanOutAccumulates) {
  Net net(parse(kBranchy), 3);
  net.init_params(3);
  feed_three_examples(net);
  RunContext ctx;
  float loss = net.forward(ctx);
  CountingSink sink;
  net.backward(ctx, sink);
  EXPECT_TRUE(std::isfinite(loss));
  ASSERT_EQ(sink.order.size(), 6u);
  // h is the lowest layer: its gradients are the last to be ready.
  EXPECT_EQ(sink.order[4], "h.weight");
  EXPECT_EQ(sink.order[5], "h.bias");

  // h's output feeds two layers: its gradient must be the sum of both paths.
  // Check numerically on h.bias[0].
  Param* hb = net.find_param("h.bias");
  const float g = hb->grad[0];
  const float eps = 1e-2f, saved = hb->value[0];
  hb->value[0] = saved + eps;
  float up = net.forward(ctx);
  hb->value[0] = saved - eps;
  float down = net.forward(ctx);
  hb->value[0] = saved;
  EXPECT_NEAR(g, (up - down) / (2 * eps), 1e-3);
}

// A sink that forms `a.weight`'s gradient itself (from a's input and output
// gradient): backward leaves that gradient alone and still computes the rest.
struct FormingSink : CountingSink {
  std::vector<BlobPart> parts{{"h", false}, {"a", true}};
  const std::vector<BlobPart>& gradient_sources(const Param& p) const override {
    return p.name == "a.weight" ? parts : no_sources();
  }
};

TEST(Net, BackwardSkipsTheGradientsItsSinkFormsItself) {
  Net net(parse(kBranchy), 3);
  net.init_params(3);
  feed_three_examples(net);
  RunContext ctx;
  net.forward(ctx);
  CountingSink plain;
  net.backward(ctx, plain);
  const Tensor& weight_grad = net.find_param("a.weight")->grad;
  const std::vector<float> computed(weight_grad.data(), weight_grad.data() + weight_grad.numel());
  const Tensor& bias_grad = net.find_param("a.bias")->grad;
  const std::vector<float> bias(bias_grad.data(), bias_grad.data() + bias_grad.numel());
  ASSERT_NE(computed[0], 7.f);

  net.find_param("a.weight")->grad.fill(7.f);
  net.find_param("a.bias")->grad.fill(7.f);
  FormingSink forming;
  net.backward(ctx, forming);
  const Tensor& skipped = net.find_param("a.weight")->grad;
  for (int64_t i = 0; i < skipped.numel(); ++i) ASSERT_EQ(skipped[i], 7.f) << i;
  for (size_t i = 0; i < bias.size(); ++i) ASSERT_EQ(bias_grad[i], bias[i]) << i;
  EXPECT_EQ(forming.order.size(), 6u) << "every gradient is still reported";

  // A plain sink again: the gradient is computed as before.
  net.backward(ctx, plain);
  for (size_t i = 0; i < computed.size(); ++i) ASSERT_EQ(weight_grad[i], computed[i]) << i;
}

TEST(Net, ParametersLiveInOneFlatBuffer) {
  Net net(parse(kBranchy), 2);
  int64_t total = 0;
  const float* base = net.flat_values().data();
  for (Param* p : net.params()) {
    ASSERT_TRUE(p->learnable);
    EXPECT_GE(p->value.data(), base);
    EXPECT_LE(p->value.data() + p->value.numel(), base + net.flat_values().numel());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->value.data()) % 64, 0u);
    EXPECT_EQ(p->grad.data() - net.flat_grads().data(), p->value.data() - base);
    total += p->value.numel();
  }
  EXPECT_EQ(total, net.num_learnable());
  EXPECT_EQ(total, 3 * 5 + 5 + 2 * (5 * 4 + 4));
}

TEST(Net, ReshapeKeepsParameters) {
  Net net(parse(kBranchy), 2);
  net.init_params(1);
  float w = net.find_param("a.weight")->value[3];
  net.reshape(7);
  EXPECT_EQ(net.blob("data").value.shape(), (Shape{7, 3}));
  EXPECT_EQ(net.blob("joined").value.shape(), (Shape{7, 4}));
  EXPECT_EQ(net.find_param("a.weight")->value[3], w);
}

TEST(Net, InitIsDeterministicAndPyTorchScaled) {
  Net a(parse(kBranchy), 1), b(parse(kBranchy), 1);
  a.init_params(42);
  b.init_params(42);
  Param* pa = a.find_param("h.weight");
  Param* pb = b.find_param("h.weight");
  float bound = 1.f / std::sqrt(3.f);
  for (int64_t i = 0; i < pa->value.numel(); ++i) {
    EXPECT_EQ(pa->value[i], pb->value[i]);
    EXPECT_LE(std::abs(pa->value[i]), bound);
  }
}

TEST(Net, DefaultInputsChainLayers) {
  Net net(parse(R"(name: chain
inputs: {data: [2, 4, 4], label: []}
layers:
  - {name: c, type: conv, num_output: 3, kernel_size: 3, pad: 1}
  - {name: r, type: relu}
  - {name: f, type: fc, num_output: 5}
  - {name: loss, type: softmax_loss, inputs: [f, label]}
)"),
          2);
  EXPECT_EQ(net.layer(1).inputs(), std::vector<std::string>{"c"});
  EXPECT_EQ(net.blob("f").value.shape(), (Shape{2, 5}));
  EXPECT_FALSE(net.blob("data").needs_grad);
}

TEST(Net, OverridesAddressListElementsByName) {
  ConfigNode model = parse(kBranchy);
  apply_override(model.yaml(), "layers.h.num_output=7");
  apply_override(model.yaml(), "inputs.data=[6]");
  Net net(model, 1);
  EXPECT_EQ(net.find_param("h.weight")->shape, (Shape{7, 6}));
  EXPECT_THROW(apply_override(model.yaml(), "layers.nosuch.num_output=1"), ConfigError);
}

// FLOPs count 2 per multiply-add of the GEMMs; bias additions are not counted.
TEST(Net, FlopsOfFcAndConv) {
  Net net(parse(R"(name: f
inputs: {data: [2, 6, 6]}
layers:
  - {name: c, type: conv, num_output: 3, kernel_size: 3}
  - {name: f, type: fc, num_output: 5}
)"),
          1);
  EXPECT_EQ(net.layer(0).forward_flops(net.layer_input_shapes(0)), 2 * 3 * 4 * 4 * 2 * 9);
  EXPECT_EQ(net.layer(1).forward_flops(net.layer_input_shapes(1)), 2 * 48 * 5);
}

}  // namespace poseidon
