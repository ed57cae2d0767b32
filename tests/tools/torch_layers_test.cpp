// Numerics against PyTorch: tests/torch/layer_reference.py runs PyTorch's
// sigmoid, tanh, GELU (both forms), leaky ReLU, PReLU (per channel and
// shared), local response normalisation (odd, even and default windows) and
// element-wise product and maximum forward and backward in float64; each
// layer, given the same inputs, parameters and output gradient, must give the
// same output, input gradients and parameter gradients to 1e-5 of
// max(|torch|, 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/registry.h"
#include "core/safetensors.h"
#include "tools/cli_runner.h"
#include "tools/torch_scripts.h"

namespace poseidon::testing {
namespace {

constexpr double kTolerance = 1e-5;

void expect_close(const std::string& what, const Tensor& ours, const SafetensorsTensor& ref) {
  ASSERT_EQ(ours.shape(), ref.shape) << what;
  int reported = 0;
  for (int64_t i = 0; i < ours.numel(); ++i) {
    const double scale = std::max(1.0, std::abs(double(ref.data[i])));
    if (std::abs(ours[i] - ref.data[i]) > kTolerance * scale && ++reported <= 5)
      ADD_FAILURE() << what << "[" << i << "]: ours " << ours[i] << ", torch " << ref.data[i];
  }
}

TEST(TorchLayers, ForwardAndBackwardMatchPyTorch) {
  POSEIDON_REQUIRE_TORCH();
  TempDir dir;
  ScriptResult script = run_torch_script("layer_reference.py", "--workdir " + shell_quoted(dir.path().string()));
  ASSERT_EQ(script.status, 0) << script.output;

  std::set<std::string> types;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    const SafetensorsFile ref = read_safetensors(entry.path().string());
    const ConfigNode config = ConfigNode::parse(ref.metadata.at("layer"), name);
    types.insert(config.get_string("type"));
    auto layer = LayerRegistry::instance().create(config);

    std::vector<Tensor> in, in_grad;
    std::vector<Shape> shapes;
    for (size_t k = 0; ref.tensors.count("input." + std::to_string(k)); ++k) {
      in.push_back(tensor_of(ref.tensors.at("input." + std::to_string(k))));
      in_grad.emplace_back(in.back().shape());
      shapes.push_back(in.back().shape());
    }
    const std::vector<Shape> out_shapes = layer->reshape(shapes);
    ASSERT_EQ(out_shapes.size(), 1u);
    for (Param& p : layer->params()) {
      const std::string suffix = p.name.substr(p.name.find('.') + 1);
      ASSERT_TRUE(ref.tensors.count("param." + suffix)) << p.name;
      p.value = tensor_of(ref.tensors.at("param." + suffix));
      ASSERT_EQ(p.value.shape(), p.shape) << p.name;
      p.grad = Tensor(p.shape);
    }
    Tensor out(out_shapes[0]);
    Tensor out_grad = tensor_of(ref.tensors.at("out_grad"));
    LayerIO io;
    for (size_t k = 0; k < in.size(); ++k) io.in.push_back(&in[k]), io.in_grad.push_back(&in_grad[k]);
    io.out = {&out};
    io.out_grad = {&out_grad};
    std::mt19937_64 rng(1);
    RunContext ctx{Phase::train, &rng, {}};
    layer->forward(io, ctx);
    expect_close("output", out, ref.tensors.at("output"));
    layer->backward(io, ctx);
    for (size_t k = 0; k < in.size(); ++k)
      expect_close("input gradient " + std::to_string(k), in_grad[k],
                   ref.tensors.at("input_grad." + std::to_string(k)));
    for (const Param& p : layer->params())
      expect_close(p.name + " gradient", p.grad, ref.tensors.at("param_grad." + p.name.substr(p.name.find('.') + 1)));
  }
  EXPECT_EQ(types, (std::set<std::string>{"sigmoid", "tanh", "gelu", "leaky_relu", "prelu", "lrn", "eltwise"}))
      << script.output;
}

}  // namespace
}  // namespace poseidon::testing
