// ReLU fusion (Net::fuse_relus): a fused net computes what the unfused one
// does, bit for bit (the producer evaluates the ReLU layer's expressions), on
// ResNet's and Inception's graphs; a ReLU whose input another layer reads, or
// whose input a caller keeps, stays a layer of its own; the fused ReLU's blob
// names stay reachable.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/net.h"
#include "net_fixtures.h"

namespace poseidon {
namespace {

using namespace testing;  // net_fixtures.h

int count_type(const Net& net, const std::string& type) {
  int n = 0;
  for (size_t i = 0; i < net.num_layers(); ++i) n += net.layer(i).type() == type;
  return n;
}

// Two training steps' forward and backward (the second after a plain SGD
// step, so that it starts from parameters the first step's gradients
// moved), then a test-phase forward: losses, every parameter gradient, the
// running statistics and every ReLU output agree exactly.
void expect_fusion_changes_nothing(const ConfigNode& model, int64_t batch, int expected_fused,
                                   Precision precision = Precision::fp32) {
  Net plain(model, batch), fused(model, batch);
  plain.set_precision(precision);
  fused.set_precision(precision);
  EXPECT_EQ(fused.fuse_relus(), expected_fused);
  for (Net* net : {&plain, &fused}) {
    net->init_params(5);
    feed(*net, 9);
  }
  NullSink sink;
  for (int step = 0; step < 2; ++step) {
    std::mt19937_64 rng_plain(step), rng_fused(step);  // dropout draws the same masks in both
    RunContext ctx_plain{Phase::train, &rng_plain, {}}, ctx_fused{Phase::train, &rng_fused, {}};
    const float loss_plain = plain.forward(ctx_plain), loss_fused = fused.forward(ctx_fused);
    EXPECT_EQ(loss_plain, loss_fused) << "step " << step;
    plain.backward(ctx_plain, sink);
    fused.backward(ctx_fused, sink);
    EXPECT_TRUE(same_values(plain.flat_grads(), fused.flat_grads())) << "step " << step;
    EXPECT_TRUE(same_values(plain.flat_buffers(), fused.flat_buffers())) << "step " << step;
    for (Net* net : {&plain, &fused})
      for (int64_t i = 0; i < net->flat_values().numel(); ++i)
        net->flat_values()[i] -= 0.05f * net->flat_grads()[i];
  }
  RunContext test{Phase::test, nullptr, {}};
  EXPECT_EQ(plain.forward(test), fused.forward(test));
  int relus = 0;
  for (size_t i = 0; i < plain.num_layers(); ++i) {
    if (plain.layer(i).type() != "relu") continue;
    ++relus;
    const std::string& out = plain.layer(i).outputs()[0];
    EXPECT_TRUE(same_values(plain.blob(out).value, fused.blob(out).value)) << out;
  }
  EXPECT_GE(relus, expected_fused);
}

}  // namespace

// Every ReLU of resnet_small follows a batch norm (the stem and the first
// convolution of each of six blocks) or a residual sum (each block's end).
TEST(ReluFusion, ResNetFusedMatchesUnfused) {
  const ConfigNode model = model_file("resnet_small.yaml");
  expect_fusion_changes_nothing(model, 2, 1 + 6 * 2);
  Net net(model, 2);
  net.fuse_relus();
  for (size_t i = 0; i < net.num_layers(); ++i)
    EXPECT_EQ(net.fused(i), net.layer(i).type() == "relu") << net.layer(i).name();
}

// Inception-V3's convolutions are conv -> batch norm -> ReLU, each batch norm
// read by its ReLU only: every ReLU fuses.
TEST(ReluFusion, InceptionFusedMatchesUnfused) {
  const ConfigNode model = model_file("inception_v3.yaml", {"vars.size=75", "vars.aux=false", "vars.num_classes=10"});
  Net shapes(model, 1, Net::ShapesOnly{});
  expect_fusion_changes_nothing(model, 2, count_type(shapes, "relu"));
}

// Convolutions and fc layers apply a ReLU through each of their CPU engines:
// oneDNN's direct convolution (8x8 images), its matrix products on small
// images (2x2), im2col + GEMM, oneDNN's matmul and BLAS.
const char* kConvFcPaths = R"(name: conv_fc_paths
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: direct, type: conv, num_output: 8, kernel_size: 3, pad: 1}
  - {name: relu1, type: relu}
  - {name: unrolled, type: conv, num_output: 8, kernel_size: 3, pad: 1, engine: im2col}
  - {name: relu2, type: relu}
  - {name: pool, type: pool, mode: max, kernel_size: 4, stride: 4}
  - {name: small, type: conv, num_output: 16, kernel_size: 3, pad: 1}
  - {name: relu3, type: relu}
  - {name: fc1, type: fc, num_output: 12}
  - {name: relu4, type: relu}
  - {name: fc2, type: fc, num_output: 12, engine: blas}
  - {name: relu5, type: relu}
  - {name: fc3, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc3, label]}
)";

TEST(ReluFusion, ConvAndFcFusedMatchUnfusedOnEveryEngine) {
  const ConfigNode model = ConfigNode::parse(kConvFcPaths, "conv_fc_paths.yaml");
  expect_fusion_changes_nothing(model, 4, 5);
}

// In bf16 the engines multiply rounded operands; the ReLU sees the same
// float32 results either way (the BLAS fc computes in float32).
TEST(ReluFusion, ConvAndFcFusedMatchUnfusedInBf16) {
  const ConfigNode model = ConfigNode::parse(kConvFcPaths, "conv_fc_paths.yaml");
  expect_fusion_changes_nothing(model, 4, 5, Precision::bf16);
}

// LeNet and VGG: every ReLU follows a convolution or an fc layer.
TEST(ReluFusion, LeNetAndVggSmallFusedMatchUnfused) {
  for (const char* name : {"lenet.yaml", "vgg_small.yaml"}) {
    SCOPED_TRACE(name);
    const ConfigNode model = model_file(name);
    Net shapes(model, 1, Net::ShapesOnly{});
    expect_fusion_changes_nothing(model, 2, count_type(shapes, "relu"));
  }
}

const char* kSharedBatchNorm = R"(name: shared
inputs: {data: [2, 4, 4], label: []}
layers:
  - {name: conv, type: conv, num_output: 3, kernel_size: 3, pad: 1}
  - {name: bn, type: batch_norm}
  - {name: relu, type: relu, inputs: bn}
  - {name: side, type: pool, mode: max, kernel_size: 2, inputs: bn}
  - {name: pooled, type: pool, mode: avg, kernel_size: 2, inputs: relu}
  - {name: joined, type: sum, inputs: [side, pooled]}
  - {name: flat, type: flatten}
  - {name: fc, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";

// bn feeds the pool beside the ReLU, which needs its values before the ReLU.
TEST(ReluFusion, InputReadByAnotherLayerIsNotFused) {
  Net net(ConfigNode::parse(kSharedBatchNorm, "shared.yaml"), 2);
  EXPECT_EQ(net.fuse_relus(), 0);
  for (size_t i = 0; i < net.num_layers(); ++i) EXPECT_FALSE(net.fused(i));
  EXPECT_NE(net.blob("bn").value.data(), net.blob("relu").value.data());
}

const char* kChain = R"(name: chain
inputs: {data: [2, 4, 4], label: []}
layers:
  - {name: conv, type: conv, num_output: 3, kernel_size: 3, pad: 1}
  - {name: bn, type: batch_norm}
  - {name: relu, type: relu}
  - {name: flat, type: flatten}
  - {name: fc, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";

// After fusion both names reach the one tensor, which holds the ReLU's
// output; a blob in `keep` is left as it is, its ReLU unfused.
TEST(ReluFusion, FusedBlobNamesShareTheReluOutputUnlessKept) {
  const ConfigNode model = ConfigNode::parse(kChain, "chain.yaml");
  Net fused(model, 2), kept(model, 2);
  EXPECT_EQ(fused.fuse_relus(), 1);
  EXPECT_EQ(kept.fuse_relus({"bn"}), 0);
  EXPECT_EQ(fused.blob("bn").value.data(), fused.blob("relu").value.data());
  EXPECT_EQ(fused.blob("bn").grad.data(), fused.blob("relu").grad.data());
  EXPECT_EQ(fused.fuse_relus(), 0);  // nothing more to fuse
  RunContext ctx{Phase::train, nullptr, {}};
  for (Net* net : {&fused, &kept}) {
    net->init_params(2);
    feed(*net, 4);
    net->forward(ctx);
  }
  const Tensor& before_relu = kept.blob("bn").value;
  float lowest = 0.f;
  for (int64_t i = 0; i < before_relu.numel(); ++i) lowest = std::min(lowest, before_relu[i]);
  EXPECT_LT(lowest, 0.f);  // the kept blob holds batch norm's own output
  EXPECT_TRUE(same_values(fused.blob("relu").value, kept.blob("relu").value));
  // A new batch size reallocates the blobs: the names still share them.
  fused.reshape(3);
  EXPECT_EQ(fused.blob("bn").value.data(), fused.blob("relu").value.data());
  EXPECT_EQ(fused.blob("bn").grad.data(), fused.blob("relu").grad.data());
  EXPECT_EQ(fused.blob("relu").value.shape(), (Shape{3, 3, 4, 4}));
}

}  // namespace poseidon
