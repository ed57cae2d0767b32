// Input gradients written, not added, by the first layer in backward's order
// to reach them (LayerIO::in_grad_unset): a net computes exactly what it
// computes when every gradient is zeroed first and every layer adds, on each
// engine of the layers that overwrite (convolution, batch norm, sum, pooling,
// concat, fc), in fp32 and bf16, with NaNs left in every gradient before
// backward; and the Net grants the overwrite to the right layers and inputs.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <random>
#include <string>

#include "core/net.h"
#include "net_fixtures.h"

namespace poseidon {
namespace {

using namespace testing;  // net_fixtures.h

// Runs the layers' own code and records each granted overwrite as
// "layer:input". With `adding`, runs backward as it ran before overwrites
// existed: the granted gradient is zeroed and the layer adds to it.
class RecordingRunner : public LayerRunner {
 public:
  RecordingRunner(std::vector<std::string>& granted, bool adding) : granted_(granted), adding_(adding) {}
  void backward(size_t, Layer& layer, LayerIO& io, RunContext& ctx) override {
    for (size_t k = 0; k < io.in_grad.size(); ++k)
      if (io.overwrites_input_grad(k)) granted_.push_back(layer.name() + ":" + std::to_string(k));
    if (!adding_) return layer.backward(io, ctx);
    LayerIO add = io;
    for (size_t k = 0; k < io.in_grad.size(); ++k)
      if (io.overwrites_input_grad(k)) io.in_grad[k]->zero();
    add.in_grad_unset.clear();
    layer.backward(add, ctx);
  }

 private:
  std::vector<std::string>& granted_;
  bool adding_;
};

// Two training steps (the second after an SGD step) of a net whose layers
// overwrite and of one that zeroes and adds, every blob gradient holding NaN
// before each backward: every blob gradient and parameter gradient agree.
// Returns the overwrites granted in the first step.
std::vector<std::string> expect_overwrites_change_nothing(const ConfigNode& model, int64_t batch, Precision precision) {
  std::vector<std::string> granted, granted_adding;
  Net writing(model, batch), adding(model, batch);
  writing.set_layer_runner(std::make_unique<RecordingRunner>(granted, false));
  adding.set_layer_runner(std::make_unique<RecordingRunner>(granted_adding, true));
  for (Net* net : {&writing, &adding}) {
    net->set_precision(precision);
    net->fuse_relus();
    net->init_params(3);
    feed(*net, 7);
  }
  NullSink sink;
  for (int step = 0; step < 2; ++step) {
    for (Net* net : {&writing, &adding}) {
      std::mt19937_64 rng(step);
      RunContext ctx{Phase::train, &rng, {}};
      net->forward(ctx);
      for (const Blob& b : net->blobs())
        if (b.grad.defined()) net->blob(b.name).grad.fill(std::numeric_limits<float>::quiet_NaN());
      net->backward(ctx, sink);
    }
    EXPECT_TRUE(same_values(writing.flat_grads(), adding.flat_grads())) << "step " << step;
    for (const Blob& b : writing.blobs())
      if (b.needs_grad) EXPECT_TRUE(same_values(b.grad, adding.blob(b.name).grad)) << b.name << ", step " << step;
    for (Net* net : {&writing, &adding})
      for (int64_t i = 0; i < net->flat_values().numel(); ++i) net->flat_values()[i] -= 0.05f * net->flat_grads()[i];
  }
  EXPECT_EQ(granted, granted_adding);
  granted.resize(granted.size() / 2);  // the first step's
  return granted;
}

// Convolutions on each CPU engine (oneDNN direct at 8x8, im2col, pointwise
// im2col, strided 1x1, oneDNN's matrix products at 4x4 in bf16 and 2x2 in
// both), batch norm with its ReLU fused, a sum of three with its ReLU fused
// (writing two input gradients, adding to one) and a sum reading one blob
// twice, max pooling through the 2x2 kernel and the general loops,
// average pooling padded and global, a concat, and fc layers on oneDNN (one
// with its ReLU fused) and on BLAS.
const char* kWriters = R"(name: grad_writes
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: stem, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: bn, type: batch_norm}
  - {name: relu, type: relu}
  - {name: unrolled, type: conv, num_output: 8, kernel_size: 3, pad: 1, engine: im2col}
  - {name: pointwise, type: conv, num_output: 8, kernel_size: 1, engine: im2col}
  - {name: direct, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: joined, type: sum, inputs: [direct, pointwise, unrolled]}
  - {name: relu_sum, type: relu}
  - {name: twice, type: sum, inputs: [relu_sum, relu_sum]}
  - {name: halved, type: pool, mode: max, kernel_size: 2, stride: 2}
  - {name: strided, type: conv, num_output: 8, kernel_size: 1, stride: 2, inputs: pointwise}
  - {name: avg, type: pool, mode: avg, kernel_size: 3, stride: 1, pad: 1}
  - {name: cat, type: concat, inputs: [halved, avg]}
  - {name: small, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: pool3, type: pool, mode: max, kernel_size: 3, stride: 2, pad: 1}
  - {name: tiny, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: squeeze, type: conv, num_output: 8, kernel_size: 1, engine: im2col}
  - {name: global, type: pool, mode: avg, global: true}
  - {name: fc1, type: fc, num_output: 6}
  - {name: relu_fc, type: relu}
  - {name: fc2, type: fc, num_output: 6, engine: blas}
  - {name: fc3, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc3, label]}
)";

// In backward's order: each gradient goes to the last layer to read it.
// pointwise's is read by direct, joined and strided: strided writes it and
// the other two add. `twice` reads joined's tensor (through the fused
// relu_sum) on both inputs, so it is zeroed and summed. The loss does not
// overwrite: fc3's gradient is zeroed for it. Fused ReLUs' tensors are bn's,
// joined's and fc1's.
const std::vector<std::string> kGranted = {"fc3:0",    "fc2:0",    "fc1:0",    "global:0",   "squeeze:0", "tiny:0",
                                           "pool3:0",  "small:0",  "cat:0",    "cat:1",      "avg:0",     "strided:0",
                                           "halved:0", "joined:0", "joined:2", "unrolled:0", "bn:0"};

TEST(GradWrites, OverwritingMatchesZeroingAndAddingOnEveryEngine) {
  const ConfigNode model = ConfigNode::parse(kWriters, "grad_writes.yaml");
  EXPECT_EQ(expect_overwrites_change_nothing(model, 4, Precision::fp32), kGranted);
}

// In bf16 batch norm reads the stem convolution's bfloat16 output as it is
// and overwrites its gradient, as in float32. Kept in float32 by its own
// key, it reads a float32 copy of it (core/blob_types.h): the copy's
// gradient is zeroed, batch norm adds to it, and it joins the stem's
// gradient by a sum.
TEST(GradWrites, OverwritingMatchesZeroingAndAddingInBf16) {
  EXPECT_EQ(expect_overwrites_change_nothing(ConfigNode::parse(kWriters, "grad_writes.yaml"), 4, Precision::bf16),
            kGranted);
  std::string kept = kWriters;
  kept.insert(kept.find("{name: bn,") + 1, "precision: fp32, ");
  std::vector<std::string> granted = kGranted;
  granted.pop_back();
  ASSERT_EQ(kGranted.back(), "bn:0");
  EXPECT_EQ(expect_overwrites_change_nothing(ConfigNode::parse(kept, "grad_writes.yaml"), 4, Precision::bf16), granted);
}

// The residual sums' shortcuts: the sum writes the block input's gradient
// and the block's first convolution adds to it.
TEST(GradWrites, ResNetAndInceptionMatchZeroingAndAdding) {
  for (Precision p : {Precision::fp32, Precision::bf16})
    EXPECT_FALSE(expect_overwrites_change_nothing(model_file("resnet_small.yaml"), 2, p).empty());
  const ConfigNode inception =
      model_file("inception_v3.yaml", {"vars.size=75", "vars.aux=false", "vars.num_classes=10"});
  EXPECT_FALSE(expect_overwrites_change_nothing(inception, 2, Precision::fp32).empty());
}

}  // namespace
}  // namespace poseidon
