// Softmax cross-entropy: gradient cases, the loss and its gradient on a tiny
// example worked out here with std::exp, ignored labels, and label errors.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "core/net.h"
#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("softmax_loss", "{name: loss, type: softmax_loss}", {{4, 5}, {4}}, {0, 5});
GRAD_CASE("softmax_loss_4d", "{name: loss, type: softmax_loss}", {{3, 4, 1, 1}, {3}}, {0, 4});
GRAD_CASE("softmax_loss_ignore", "{name: loss, type: softmax_loss, ignore_label: 1}", {{6, 3}, {6}},
          {0, 3});

namespace {

struct LossRun {
  std::unique_ptr<Layer> layer;
  Tensor logits, labels, loss{Shape{}}, dloss{Shape{}}, dlogits;
  LayerIO io;
  RunContext ctx;

  LossRun(const std::string& yaml, const std::vector<float>& x, const std::vector<float>& y,
          int64_t classes)
      : layer(LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"))),
        logits({static_cast<int64_t>(y.size()), classes}),
        labels({static_cast<int64_t>(y.size())}),
        dlogits(logits.shape()) {
    std::copy(x.begin(), x.end(), logits.data());
    std::copy(y.begin(), y.end(), labels.data());
    EXPECT_EQ(layer->reshape({logits.shape(), labels.shape()}).at(0), Shape{});
    io = LayerIO{{&logits, &labels}, {&loss}, {&dloss}, {&dlogits, nullptr}};
  }
  float forward() {
    layer->forward(io, ctx);
    return loss[0];
  }
};

// -log softmax(row)[label], with the naive formula (fine for small logits).
double naive_loss(const std::vector<float>& row, int label) {
  double sum = 0;
  for (float v : row) sum += std::exp(double(v));
  return -std::log(std::exp(double(row[label])) / sum);
}

double naive_prob(const std::vector<float>& row, int c) {
  double sum = 0;
  for (float v : row) sum += std::exp(double(v));
  return std::exp(double(row[c])) / sum;
}

}  // namespace

TEST(SoftmaxLoss, MeanCrossEntropyAndItsGradient) {
  const std::vector<float> a = {1.f, 2.f, 3.f}, b = {0.5f, -1.f, 2.f};
  LossRun run("{name: loss, type: softmax_loss, loss_weight: 0.5}", {1, 2, 3, 0.5, -1, 2}, {2, 0},
              3);
  EXPECT_EQ(run.layer->loss_weight(), 0.5f);
  EXPECT_NEAR(run.forward(), (naive_loss(a, 2) + naive_loss(b, 0)) / 2, 1e-6);

  run.dloss[0] = 3.f;  // the Net seeds this with loss_weight; any value scales the gradient
  run.dlogits.fill(1.f);
  run.layer->backward(run.io, run.ctx);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(run.dlogits[c], 1 + 3.0 / 2 * (naive_prob(a, c) - (c == 2)), 1e-6) << c;
    EXPECT_NEAR(run.dlogits[3 + c], 1 + 3.0 / 2 * (naive_prob(b, c) - (c == 0)), 1e-6) << c;
  }
}

TEST(SoftmaxLoss, StableForLargeLogits) {
  LossRun run("{name: loss, type: softmax_loss}", {1000.f, 1001.f, 999.f}, {0}, 3);
  EXPECT_NEAR(run.forward(), naive_loss({1.f, 2.f, 0.f}, 0), 1e-5);
}

TEST(SoftmaxLoss, IgnoredLabelsLeaveTheSumAndTheCount) {
  const std::vector<float> a = {0.2f, -0.3f, 1.f};
  LossRun run("{name: loss, type: softmax_loss, ignore_label: 1}", {0.2, -0.3, 1, 4, 5, 6}, {2, 1},
              3);
  EXPECT_NEAR(run.forward(), naive_loss(a, 2), 1e-6);
  run.dloss[0] = 1.f;
  run.layer->backward(run.io, run.ctx);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(run.dlogits[c], naive_prob(a, c) - (c == 2), 1e-6) << c;
    EXPECT_EQ(run.dlogits[3 + c], 0.f) << c;
  }
}

TEST(SoftmaxLoss, EveryLabelIgnoredGivesNaNAsPyTorch) {
  LossRun run("{name: loss, type: softmax_loss, ignore_label: 0}", {1, 2, 3, 4}, {0, 0}, 2);
  EXPECT_TRUE(std::isnan(run.forward()));
}

TEST(SoftmaxLoss, LabelOutsideTheClassesNamesLayerAndLabel) {
  for (float bad : {3.f, -1.f, 1.5f}) {
    LossRun run("{name: xent, type: softmax_loss}", {1, 2, 3, 4, 5, 6}, {0, bad}, 3);
    try {
      run.forward();
      ADD_FAILURE() << "label " << bad << " was accepted";
    } catch (const Error& e) {
      std::string what = e.what();
      EXPECT_NE(what.find("xent"), std::string::npos) << what;
      std::ostringstream label;
      label << "label " << bad;
      EXPECT_NE(what.find(label.str()), std::string::npos) << what;
    }
  }
}

TEST(SoftmaxLoss, RejectsLabelsOfAnotherBatch) {
  auto layer =
      LayerRegistry::instance().create(ConfigNode::parse("{name: l, type: softmax_loss}", "t"));
  EXPECT_THROW(layer->reshape({{4, 3}, {5}}), ConfigError);
  EXPECT_THROW(layer->reshape({{4, 3, 2, 2}, {4}}), ConfigError);
}

// In a Net the loss is weighted into the objective and its gradient is seeded
// with loss_weight; the accuracy beside it is a metric that runs no backward.
TEST(SoftmaxLoss, DrivesBackwardInsideANet) {
  const char* model = R"(
name: t
inputs: {data: [2, 2, 1], label: []}
layers:
  - {name: bn, type: batch_norm, inputs: data, decay_mult: 0}
  - {name: flat, type: flatten, inputs: bn}
  - {name: drop, type: dropout, inputs: flat, ratio: 0.2}
  - {name: loss, type: softmax_loss, inputs: [drop, label], loss_weight: 2}
  - {name: acc, type: accuracy, inputs: [flat, label]}
)";
  Net net(ConfigNode::parse(model, "model.yaml"), 4);
  net.init_params(1);
  EXPECT_EQ(net.loss_outputs(), std::vector<std::string>{"loss"});
  EXPECT_EQ(net.metric_outputs(), std::vector<std::string>{"acc"});
  EXPECT_EQ(net.find_param("bn.running_var")->value[1], 1.f);
  EXPECT_EQ(net.find_param("bn.weight")->decay_mult, 0.f);
  Tensor& data = net.blob("data").value;
  for (int64_t i = 0; i < data.numel(); ++i) data[i] = std::sin(1.3f * i);
  const float labels[] = {0, 3, 2, 3};
  std::copy(labels, labels + 4, net.blob("label").value.data());

  struct Recorder : GradSink {
    std::vector<std::string> names;
    void grad_ready(Param& p) override { names.push_back(p.name); }
  } sink;
  std::mt19937_64 rng(9);
  RunContext ctx{Phase::train, &rng, {}};
  const float objective = net.forward(ctx);
  EXPECT_FLOAT_EQ(objective, 2.f * net.blob("loss").value[0]);
  net.backward(ctx, sink);
  EXPECT_EQ(sink.names, (std::vector<std::string>{"bn.weight", "bn.bias"}));

  const Tensor& logits = net.blob("drop").value;
  const Tensor& dlogits = net.blob("drop").grad;
  for (int64_t n = 0; n < 4; ++n) {
    std::vector<float> row(logits.data() + n * 4, logits.data() + n * 4 + 4);
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(dlogits[n * 4 + c], 2.0 / 4 * (naive_prob(row, c) - (c == labels[n])), 1e-6);
  }
}

}  // namespace poseidon::testing
