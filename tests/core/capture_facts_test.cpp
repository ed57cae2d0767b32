// Which layers keep a net's steps out of a CUDA graph (Layer::capturable,
// net_capture_facts in core/graphed_step.h): a layer that says it cannot be
// captured is named with its type, a CPU layer standing in a GPU net
// (HostFallbackLayer) says so itself, and a net of ordinary layers names
// none. Plain C++, checked without a GPU.
#include <gtest/gtest.h>

#include "core/graphed_step.h"
#include "core/host_fallback_layer.h"
#include "core/registry.h"

namespace poseidon {
namespace {

// Identity that declares, as a plug-in layer reading a host value each step
// would, that it cannot be captured.
class HostWaitingLayer : public Layer {
 public:
  explicit HostWaitingLayer(const ConfigNode& c) : Layer(c) {}
  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }
  void forward(LayerIO& io, RunContext&) override { io.out[0]->copy_from(*io.in[0]); }
  bool capturable() const override { return false; }
};

POSEIDON_REGISTER_LAYER(HostWaitingLayer, "host_waiting", "test only: identity that cannot be captured", {});

constexpr const char* kModel = R"(name: capture_facts
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 4}
  - {name: wait1, type: host_waiting}
  - {name: relu1, type: relu}
  - {name: wait2, type: host_waiting}
  - {name: loss, type: softmax_loss, inputs: [wait2, label]}
)";

TEST(CaptureFacts, NamesEachLayerThatCannotBeCaptured) {
  Net net(ConfigNode::parse(kModel, "model.yaml"), 2);
  const CaptureFacts facts = net_capture_facts(net, CudaGraphMode::automatic);
  EXPECT_EQ(facts.uncapturable_layers, (std::vector<std::string>{"wait1 (host_waiting)", "wait2 (host_waiting)"}));
  EXPECT_FALSE(facts.on_gpu);
}

TEST(CaptureFacts, OrdinaryLayersAreCapturable) {
  Net net(ConfigNode::parse(R"(name: plain
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 4}
  - {name: relu1, type: relu}
  - {name: loss, type: softmax_loss, inputs: [relu1, label]}
)",
                            "model.yaml"),
          2);
  EXPECT_TRUE(net_capture_facts(net, CudaGraphMode::automatic).uncapturable_layers.empty());
}

TEST(CaptureFacts, ACpuLayerStandingInAGpuNetCannotBeCaptured) {
  const ConfigNode config = ConfigNode::parse("{name: act, type: relu}", "model.yaml");
  HostFallbackLayer fallback(config, LayerRegistry::instance().create(config));
  EXPECT_TRUE(LayerRegistry::instance().create(config)->capturable());
  EXPECT_FALSE(fallback.capturable());
}

}  // namespace
}  // namespace poseidon
