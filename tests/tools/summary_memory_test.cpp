// `poseidon summary` shows the memory training needs, per layer and in total,
// counted here by hand for a small model: parameters, gradients and momentum
// (4 bytes per learnable value each), and every blob's value plus, where
// backward needs it, its gradient at the batch, in the blob's type (2 bytes
// for the bfloat16 blobs of a bf16 run on the CPU). It also summarises a model
// far too large to build, since nothing of its size is allocated.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

const char* kModel = R"(name: small
inputs: {data: [1, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 2, kernel_size: 3}
  - {name: relu1, type: relu}
  - {name: fc1, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

nlohmann::json summary_json(const std::string& args) {
  CliResult r = run_poseidon("summary " + args + " --json");
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

const nlohmann::json& layer(const nlohmann::json& summary, const std::string& name) {
  for (const auto& l : summary.at("layers"))
    if (l.at("name") == name) return l;
  throw std::runtime_error("no layer " + name);
}

}  // namespace

TEST(SummaryMemory, PerLayerAndTotalAtTheBatch) {
  TempDir d;
  const std::string model = d.write("model.yaml", kModel);
  const int64_t batch = 5, f = 4;
  nlohmann::json s = summary_json(model + " --batch 5");
  ASSERT_TRUE(s.contains("memory_bytes"));
  EXPECT_EQ(s.at("solver_state_counted"), true);  // a model file alone: momentum assumed

  const int64_t conv_params = 2 * 1 * 3 * 3 + 2, fc_params = (2 * 6 * 6) * 3 + 3;
  const int64_t conv_out = batch * 2 * 6 * 6;  // relu1's output has the same size
  struct Expected {
    std::string name;
    int64_t params, activations;
  };
  const std::vector<Expected> expected = {{"conv1", conv_params, 2 * conv_out},
                                          {"relu1", 0, 2 * conv_out},
                                          {"fc1", fc_params, 2 * batch * 3},
                                          {"loss", 0, 2}};  // the scalar loss and its seed gradient
  int64_t total = (batch * 8 * 8 + batch) * f;           // the inputs: images and labels
  for (const Expected& e : expected) {
    const nlohmann::json& m = layer(s, e.name).at("memory_bytes");
    EXPECT_EQ(m.at("parameters"), e.params * f) << e.name;
    EXPECT_EQ(m.at("gradients"), e.params * f) << e.name;
    EXPECT_EQ(m.at("solver_state"), e.params * f) << e.name;
    EXPECT_EQ(m.at("activations"), e.activations * f) << e.name;
    EXPECT_EQ(m.at("total"), (3 * e.params + e.activations) * f) << e.name;
    total += (3 * e.params + e.activations) * f;
  }
  EXPECT_EQ(s.at("inputs_memory_bytes"), (batch * 8 * 8 + batch) * f);
  EXPECT_EQ(s.at("memory_bytes").at("total"), total);

  CliResult text = run_poseidon("summary " + model + " --batch 5");
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("train memory"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("training memory at batch 5: "), std::string::npos) << text.out;
}

TEST(SummaryMemory, ATrainingConfigWithoutMomentumHasNoSolverState) {
  TempDir d;
  d.write("model.yaml", kModel);
  const std::string config = d.write(
      "config.yaml",
      "model: model.yaml\ndata: {train: {source: synthetic, shape: [1, 8, 8], size: 8, batch_size: 2}}\n"
      "solver: {lr: 0.1, max_iter: 1}\n");
  nlohmann::json s = summary_json(config + " --batch 5");
  EXPECT_EQ(s.at("solver_state_counted"), false);
  EXPECT_EQ(s.at("memory_bytes").at("solver_state"), 0);
  EXPECT_EQ(layer(s, "fc1").at("memory_bytes").at("gradients"), ((2 * 6 * 6) * 3 + 3) * 4);
}

// Under bf16 on the CPU conv1 and relu1 hold bfloat16 values and gradients
// (2 bytes each); fc1 writes bfloat16 as well, and the loss, a float32
// reader, adds a float32 copy of it and of its gradient. The parameters,
// gradients and solver state stay float32.
TEST(SummaryMemory, Bf16BlobsCountTwoBytesAndTheirFloat32Copies) {
  TempDir d;
  d.write("model.yaml", kModel);
  const std::string config = d.write(
      "config.yaml",
      "model: model.yaml\nprecision: bf16\n"
      "data: {train: {source: synthetic, shape: [1, 8, 8], size: 8, batch_size: 2}}\n"
      "solver: {lr: 0.1, momentum: 0.9, max_iter: 1}\n");
  nlohmann::json s = summary_json(config + " --batch 5");
  const int64_t batch = 5, conv_out = batch * 2 * 6 * 6, fc_out = batch * 3;
  const int64_t fc_params = (2 * 6 * 6) * 3 + 3;
  EXPECT_EQ(layer(s, "conv1").at("memory_bytes").at("activations"), 2 * conv_out * 2);
  EXPECT_EQ(layer(s, "relu1").at("memory_bytes").at("activations"), 2 * conv_out * 2);
  EXPECT_EQ(layer(s, "fc1").at("memory_bytes").at("activations"), 2 * fc_out * 2 + 2 * fc_out * 4);
  EXPECT_EQ(layer(s, "fc1").at("memory_bytes").at("solver_state"), fc_params * 4);
  EXPECT_EQ(layer(s, "loss").at("memory_bytes").at("activations"), 2 * 4);
}

TEST(SummaryMemory, AModelFarTooLargeToBuildIsSummarised) {
  TempDir d;
  const int64_t width = 1'000'000'000;  // fc1: 73e9 parameters, fc2 3e9: 0.9 TB for training
  std::string m = kModel;
  m.replace(m.find("{name: fc1, type: fc, num_output: 3}"), 36,
            "{name: fc1, type: fc, num_output: " + std::to_string(width) + "}\n  - {name: fc2, type: fc, num_output: 3}");
  m.replace(m.find("inputs: [fc1, label]"), 20, "inputs: [fc2, label]");
  const std::string model = d.write("model.yaml", m);
  nlohmann::json s = summary_json(model);
  const int64_t fc1 = (2 * 6 * 6 + 1) * width, fc2 = (width + 1) * 3;
  EXPECT_EQ(s.at("total_params"), 2 * 1 * 3 * 3 + 2 + fc1 + fc2);
  EXPECT_EQ(layer(s, "fc1").at("memory_bytes").at("parameters"), fc1 * 4);
  EXPECT_GT(s.at("memory_bytes").at("total").get<int64_t>(), 3 * (fc1 + fc2) * 4);  // and momentum, and activations
}

}  // namespace poseidon::testing
