// dist/gpu/host_staging_sink.h with some layers not staged (exchanged on the
// device, dist/plan/device_staging.h), on two CPU nets standing for the GPU
// net and its mirror: a staged layer's gradient is copied to the mirror and
// reported as the mirror's, its parameters brought up at its gate and back
// by bring_staged_current; an unstaged layer's gradient is reported as the
// net's own, nothing of it is copied either way. Under precision bf16 the
// blobs an exchange forms a gradient from (SFB's factors) reach the mirror
// as the bfloat16 bits they are.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/config_node.h"
#include "core/error.h"
#include "core/net.h"
#include "core/precision.h"
#include "dist/gpu/host_staging_sink.h"
#include "tests/core/net_fixtures.h"

namespace poseidon::testing {

namespace {
class RecordingSink : public GradSink {
 public:
  void grad_ready(Param& param) override { reported.push_back(&param); }
  void await_params(const Layer& layer) override { awaited.push_back(&layer); }
  std::vector<Param*> reported;
  std::vector<const Layer*> awaited;
};

size_t layer_named(Net& net, const std::string& name) {
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name() == name) return i;
  ADD_FAILURE() << "no layer " << name;
  return 0;
}

// Forms fc1.weight's gradient from fc1's input and its output's gradient,
// as SFB does.
class FactorSink : public RecordingSink {
 public:
  const std::vector<BlobPart>& gradient_sources(const Param& param) const override {
    static const std::vector<BlobPart> factors{{"pool2", false}, {"fc1", true}};
    return param.name == "fc1.weight" ? factors : GradSink::gradient_sources(param);
  }
};

void fill(Tensor& t, float value) {
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = value;
}
}  // namespace

TEST(PartialStaging, OnlyStagedLayersGoThroughTheMirror) {
  const ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net net(model, 2), mirror(model, 2);
  net.init_params(3);
  dist::copy_net_state(net, mirror);
  const size_t conv1 = layer_named(net, "conv1"), fc1 = layer_named(net, "fc1");
  std::vector<bool> staged(net.num_layers(), false);
  staged[fc1] = true;  // as if fc1 were on the parameter server
  RecordingSink host, device;
  dist::HostStagingSink sink(net, mirror, host, staged, &device);

  Param& net_conv = *net.find_param("conv1.weight");
  Param& net_fc = *net.find_param("fc1.weight");
  Param& mirror_conv = *mirror.find_param("conv1.weight");
  Param& mirror_fc = *mirror.find_param("fc1.weight");
  fill(net_conv.grad, 2.f);
  fill(net_fc.grad, 3.f);
  fill(mirror_conv.grad, 0.f);
  fill(mirror_fc.grad, 0.f);
  sink.grad_ready(net_conv);
  sink.grad_ready(net_fc);
  ASSERT_EQ(device.reported, std::vector<Param*>{&net_conv});
  ASSERT_EQ(host.reported, std::vector<Param*>{&mirror_fc});
  EXPECT_EQ(mirror_fc.grad[0], 3.f);
  EXPECT_EQ(mirror_fc.grad[mirror_fc.grad.numel() - 1], 3.f);
  EXPECT_EQ(mirror_conv.grad[0], 0.f) << "an unstaged gradient was copied to the mirror";

  // The exchanges' updates: the mirror's fc1, the net's own conv1.
  fill(mirror_fc.value, 7.f);
  fill(mirror_conv.value, 9.f);
  fill(net_conv.value, 5.f);
  sink.await_params(net.layer(conv1));
  EXPECT_EQ(net_conv.value[0], 5.f) << "an unstaged layer's parameters were uploaded from the mirror";
  sink.await_params(net.layer(fc1));
  EXPECT_EQ(net_fc.value[0], 7.f);
  EXPECT_EQ(host.awaited, (std::vector<const Layer*>{&mirror.layer(conv1), &mirror.layer(fc1)}))
      << "every gate is the mirror layer's, which the scheduler knows";

  fill(mirror_fc.value, 11.f);
  sink.bring_staged_current();
  EXPECT_EQ(net_fc.value[net_fc.value.numel() - 1], 11.f);
  EXPECT_EQ(net_conv.value[0], 5.f);
}

TEST(PartialStaging, Bf16FactorsReachTheMirrorAsTheirBits) {
  const ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net net(model, 2), mirror(model, 2);
  net.set_precision(Precision::bf16);
  mirror.set_precision(Precision::bf16);
  net.init_params(3);
  dist::copy_net_state(net, mirror);
  feed(net, 4);
  RunContext ctx;
  NullSink none;
  net.forward(ctx);
  net.backward(ctx, none);
  FactorSink host;
  dist::HostStagingSink sink(net, mirror, host, std::vector<bool>(net.num_layers(), true));
  sink.grad_ready(*net.find_param("fc1.weight"));
  ASSERT_EQ(host.reported, std::vector<Param*>{mirror.find_param("fc1.weight")});
  for (const BlobPart& part : host.gradient_sources(*net.find_param("fc1.weight"))) {
    const Tensor& from = part.gradient ? net.blob(part.blob).grad : net.blob(part.blob).value;
    const Tensor& to = part.gradient ? mirror.blob(part.blob).grad : mirror.blob(part.blob).value;
    ASSERT_EQ(from.dtype(), DType::bf16) << part.blob << ": the test means a bfloat16 blob";
    ASSERT_EQ(to.dtype(), DType::bf16) << part.blob;
    ASSERT_EQ(to.numel(), from.numel()) << part.blob;
    bool nonzero = false;
    for (int64_t i = 0; i < from.numel(); ++i) nonzero |= from.bf16_data()[i] != 0;
    EXPECT_TRUE(nonzero) << part.blob << " holds nothing to copy";
    EXPECT_EQ(0, std::memcmp(to.bf16_data(), from.bf16_data(), from.bytes())) << part.blob;
  }
}

TEST(PartialStaging, AnUnstagedLayerNeedsASinkForItsGradients) {
  const ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net net(model, 2), mirror(model, 2);
  RecordingSink host;
  EXPECT_THROW({ dist::HostStagingSink sink(net, mirror, host, std::vector<bool>(net.num_layers(), false)); },
               InternalError);
}

}  // namespace poseidon::testing
