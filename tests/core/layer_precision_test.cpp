// A layer's own `precision` key: it overrides the run's precision for that
// layer alone (fp32 kept under a bf16 run, bf16 taken in an fp32 run), the
// layer computes exactly what it computes in a run of that precision, the
// other layers follow the run; a value a layer cannot honour is refused with
// the file, line and key.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/device_memory.h"
#include "core/net.h"
#include "net_fixtures.h"

namespace poseidon {
namespace {

using namespace testing;  // net_fixtures.h

// `conv1_key` goes into conv1's map, e.g. ", precision: fp32".
std::string model_text(const std::string& conv1_key = "", const std::string& relu_key = "") {
  return R"(name: mixed
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, num_output: 8, kernel_size: 3, pad: 1)" +
         conv1_key + R"(}
  - {name: relu1, type: relu)" +
         relu_key + R"(}
  - {name: conv2, type: conv, num_output: 4, kernel_size: 3}
  - {name: fc, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";
}

Layer& layer_named(Net& net, const std::string& name) {
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name() == name) return net.layer(i);
  throw std::runtime_error("no layer " + name);
}

ConfigNode model(const std::string& conv1_key = "", const std::string& relu_key = "") {
  return ConfigNode::parse(model_text(conv1_key, relu_key), "mixed.yaml");
}

// conv1's output after one training-phase forward from the same parameters
// and batch.
Tensor conv1_output(const ConfigNode& config, Precision run) {
  Net net(config, 4);
  net.set_precision(run);
  net.init_params(11);
  feed(net, 12);
  RunContext ctx;
  net.forward(ctx);
  Tensor copy(net.blob("conv1").value.shape());
  copy.copy_from(net.blob("conv1").value);
  return copy;
}

std::string thrown_by_building(const ConfigNode& config, Precision run = Precision::fp32) {
  try {
    Net net(config, 2);
    net.set_precision(run);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "nothing thrown";
}

// conv1 carries `precision: <own>` in a run of `run`: it computes exactly
// what a run of `own` computes, and not what one of `run` does (so the
// equality is the key's doing); the other layers follow the run.
void expect_conv1_follows_its_key(Precision own, Precision run) {
  const std::string key = std::string(", precision: ") + precision_name(own);
  Net net(model(key), 4);
  net.set_precision(run);
  EXPECT_EQ(layer_named(net, "conv1").precision(), own);
  EXPECT_EQ(layer_named(net, "conv2").precision(), run);
  EXPECT_EQ(layer_named(net, "fc").precision(), run);

  const Tensor out = conv1_output(model(key), run);
  EXPECT_TRUE(same_values(out, conv1_output(model(), own)));
  EXPECT_FALSE(same_values(out, conv1_output(model(), run)));
}

}  // namespace

TEST(LayerPrecision, Fp32KeptUnderABf16Run) { expect_conv1_follows_its_key(Precision::fp32, Precision::bf16); }

// An fp32 run is the Net's from its construction (set_precision then
// changes nothing), so the key takes effect as the layer is built.
TEST(LayerPrecision, Bf16TakenInAnFp32Run) { expect_conv1_follows_its_key(Precision::bf16, Precision::fp32); }

TEST(LayerPrecision, ATrainingStepOfAMixedNetIsFiniteAndMovesTheKeptLayer) {
  Net mixed(model(", precision: fp32"), 4), plain(model(), 4);
  mixed.set_precision(Precision::bf16);
  plain.set_precision(Precision::bf16);
  for (Net* net : {&mixed, &plain}) {
    net->init_params(11);
    feed(*net, 12);
    RunContext ctx;
    net->forward(ctx);
    NullSink sink;
    net->backward(ctx, sink);
  }
  const Tensor& grad = layer_named(mixed, "conv1").params()[0].grad;
  for (int64_t i = 0; i < grad.numel(); ++i) ASSERT_TRUE(std::isfinite(grad[i])) << i;
  // conv1's weight gradient reads its input unrounded where the all-bf16 run rounds it.
  EXPECT_FALSE(same_values(grad, layer_named(plain, "conv1").params()[0].grad));
}

TEST(LayerPrecision, ValuesALayerCannotHonourAreRefusedWithTheirLine) {
  const std::string tf32 = thrown_by_building(model(", precision: tf32"));
  EXPECT_NE(tf32.find("mixed.yaml:4"), std::string::npos) << tf32;
  EXPECT_NE(tf32.find("expected precision fp32 or bf16, got 'tf32'"), std::string::npos) << tf32;

  const std::string unknown = thrown_by_building(model(", precision: half"));
  EXPECT_NE(unknown.find("got 'half'"), std::string::npos) << unknown;

  const std::string relu = thrown_by_building(model("", ", precision: bf16"));
  EXPECT_NE(relu.find("mixed.yaml:5"), std::string::npos) << relu;
  EXPECT_NE(relu.find("'relu1' (relu) has no bf16 path"), std::string::npos) << relu;
  // fp32 is every layer's: a no-op on a relu, not an error.
  EXPECT_EQ(thrown_by_building(model("", ", precision: fp32"), Precision::bf16), "nothing thrown");
}

// TF32 is the GPU context's math for every layer of a run, so a layer
// cannot keep float32 in a tf32 run.
TEST(LayerPrecision, Fp32KeptUnderATf32RunIsRefused) {
  if (device_memory::cuda_device_count() == 0) GTEST_SKIP() << "no GPU: tf32 runs only on one";
  try {
    Net net(model(", precision: fp32"), 2, Device::cuda(0));
    net.set_precision(Precision::tf32);
    FAIL() << "a tf32 run took a layer that keeps float32";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("a tf32 run cannot give one layer"), std::string::npos) << e.what();
  }
}

}  // namespace poseidon
