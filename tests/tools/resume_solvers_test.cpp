// Resume is exact for every update rule: with adam, adamw and rmsprop, 12
// iterations straight and 6 + resume + 6 give bitwise identical parameters
// and optimizer state (moments and step counts under PyTorch's names), on a
// model that also trains PReLU slopes through LRN, GELU and a gated branch.
#include <gtest/gtest.h>

#include "core/safetensors.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

class ResumeSolvers : public ::testing::TestWithParam<std::string> {};

TEST_P(ResumeSolvers, HalfAndHalfEqualsStraightBitwise) {
  TempDir d;
  write_idx_dataset(d.file("img.idx"), d.file("lbl.idx"), 30, 10, 8);
  d.write("model.yaml", R"(name: small
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 3, stride: 3}
  - {name: bn1, type: batch_norm}
  - {name: norm1, type: lrn, local_size: 3, alpha: 0.1}
  - {name: act1, type: prelu}
  - {name: gate, type: sigmoid, inputs: conv1}
  - {name: gated, type: eltwise, inputs: [act1, gate]}
  - {name: act2, type: gelu}
  - {name: fc1, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)");
  const std::string solver =
      "{type: " + GetParam() + ", lr: 0.01, weight_decay: 0.01, lr_policy: cosine, max_iter: 12}";
  const std::string config =
      d.write("config.yaml",
              "model: model.yaml\nseed: 4\nthreads: 2\ndata:\n  train: {source: idx, images: " + d.file("img.idx") +
                  ", labels: " + d.file("lbl.idx") + ", batch_size: 7, shuffle: true}\nsolver: " + solver +
                  "\ntrain: {display: 1, snapshot_interval: 6}\n");
  CliResult straight = run_poseidon("train " + config + " --quiet --set train.output_dir=" + d.file("a"));
  ASSERT_EQ(straight.status, 0) << straight.err;
  CliResult resumed = run_poseidon("train " + config + " --quiet --set train.output_dir=" + d.file("b") + " --resume " +
                                   d.file("a/iter_6.safetensors"));
  ASSERT_EQ(resumed.status, 0) << resumed.err;

  const SafetensorsFile mid = read_safetensors(d.file("a/iter_6.safetensors"));
  const SafetensorsFile a = read_safetensors(d.file("a/final.safetensors"));
  const SafetensorsFile b = read_safetensors(d.file("b/final.safetensors"));
  EXPECT_EQ(mid.tensors.at("optimizer.fc1.weight.step").data, std::vector<float>{6.f});
  EXPECT_EQ(b.tensors.at("optimizer.conv1.bias.step").data, std::vector<float>{12.f});
  EXPECT_GT(b.tensors.count("optimizer.act1.weight." + std::string(GetParam() == "rmsprop" ? "square_avg" : "exp_avg")),
            0u);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, ta] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    EXPECT_EQ(ta.shape, b.tensors.at(name).shape) << name;
    EXPECT_EQ(ta.data, b.tensors.at(name).data) << name << " differs";
  }
  // The second half trained: the resumed run moved the parameters on from the snapshot.
  EXPECT_NE(mid.tensors.at("fc1.weight").data, b.tensors.at("fc1.weight").data);
}

INSTANTIATE_TEST_SUITE_P(Rules, ResumeSolvers, ::testing::Values("adam", "adamw", "rmsprop"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace poseidon::testing
