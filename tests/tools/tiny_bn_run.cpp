// The shared small training run of tiny_bn_run.h.
#include "tools/tiny_bn_run.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/safetensors.h"

namespace poseidon::testing {

namespace {
constexpr const char* kModel = R"(name: tiny_bn
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5, stride: 2}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 16}
  - {name: drop1, type: dropout, ratio: 0.3}
  - {name: fc2, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";
}  // namespace

std::string write_tiny_bn_run(const TempDir& d, int seed, const std::string& config_tail,
                              const std::string& extra_layers) {
  write_idx_dataset(d.file("img.idx"), d.file("lbl.idx"), 40, 10, 5);
  d.write("model.yaml", kModel + extra_layers);
  return d.write("config.yaml", "model: model.yaml\nseed: " + std::to_string(seed) +
                                    "\nthreads: 1\ndata:\n  train: {source: idx, images: " + d.file("img.idx") +
                                    ", labels: " + d.file("lbl.idx") + ", batch_size: 6, shuffle: true}\n" +
                                    config_tail);
}

void expect_same_checkpoint(const std::string& a_path, const std::string& b_path) {
  SafetensorsFile a = read_safetensors(a_path);
  SafetensorsFile b = read_safetensors(b_path);
  EXPECT_EQ(a.metadata, b.metadata) << a_path << " and " << b_path;
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  EXPECT_GT(a.tensors.count("bn1.running_mean"), 0u) << "no batch norm statistics";
  for (const auto& [name, ta] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    const auto& tb = b.tensors.at(name);
    ASSERT_EQ(ta.data.size(), tb.data.size()) << name;
    EXPECT_EQ(0, std::memcmp(ta.data.data(), tb.data.data(), ta.data.size() * sizeof(float))) << name << " differs";
  }
}

}  // namespace poseidon::testing
