// Resume is exact: N iterations straight and N/2 + resume + N/2 give bitwise
// identical parameters and optimizer state (shuffling, dropout and a cosine
// schedule included), on the CPU and on a GPU, in float32 and bf16.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "core/safetensors.h"
#include "gpu_required.h"
#include "layers/dnnl_support.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// Trains the same small net 16 iterations straight and 8 + resume + 8 with
// `sets` (--set options) added to both runs, and compares what they saved.
// With `straight_kernels`, the straight run alone is told the CPU's bf16
// kernels (POSEIDON_CPU_BF16_KERNELS); the resumed run takes them from its
// checkpoint.
void expect_half_and_half_equals_straight(const std::string& sets, const std::string& straight_kernels = "") {
  TempDir d;
  write_idx_dataset(d.file("img.idx"), d.file("lbl.idx"), 40, 10, 5);
  d.write("model.yaml", R"(name: tiny
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5, stride: 2}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 16}
  - {name: drop1, type: dropout, ratio: 0.3}
  - {name: fc2, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)");
  std::string config =
      d.write("config.yaml", "model: model.yaml\nseed: 9\nthreads: 2\ndata:\n  train: {source: idx, images: " +
                                 d.file("img.idx") + ", labels: " + d.file("lbl.idx") +
                                 ", batch_size: 6, shuffle: true}\n"
                                 "solver: {lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.001, "
                                 "lr_policy: cosine, warmup_iters: 3, max_iter: 16}\n"
                                 "train: {display: 1, snapshot_interval: 8}\n");
  // 40 examples at batch 6: 6 batches an epoch, so 16 iterations cross two epoch boundaries.
  if (!straight_kernels.empty()) setenv("POSEIDON_CPU_BF16_KERNELS", straight_kernels.c_str(), 1);
  CliResult straight = run_poseidon("train " + config + " --quiet" + sets + " --set train.output_dir=" + d.file("a"));
  unsetenv("POSEIDON_CPU_BF16_KERNELS");
  ASSERT_EQ(straight.status, 0) << straight.err;
  CliResult resumed = run_poseidon("train " + config + " --quiet" + sets + " --set train.output_dir=" + d.file("b") +
                                   " --resume " + d.file("a/iter_8.safetensors"));
  ASSERT_EQ(resumed.status, 0) << resumed.err;

  SafetensorsFile a = read_safetensors(d.file("a/final.safetensors"));
  SafetensorsFile b = read_safetensors(d.file("b/final.safetensors"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  EXPECT_GT(a.tensors.count("optimizer.fc1.weight.momentum_buffer"), 0u);
  for (const auto& [name, ta] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    const auto& tb = b.tensors.at(name);
    ASSERT_EQ(ta.shape, tb.shape) << name;
    EXPECT_EQ(0, std::memcmp(ta.data.data(), tb.data.data(), ta.data.size() * sizeof(float))) << name << " differs";
  }
  EXPECT_EQ(a.metadata.at("iteration"), "16");
  EXPECT_EQ(b.metadata.at("iteration"), "16");
  EXPECT_EQ(a.metadata.at("rng"), b.metadata.at("rng"));
  if (!straight_kernels.empty()) {
    EXPECT_EQ(a.metadata.at("cpu_bf16_kernels"), straight_kernels);
    EXPECT_EQ(b.metadata.at("cpu_bf16_kernels"), straight_kernels);
  }

  // The resumed run must really have trained: its parameters moved from the snapshot.
  SafetensorsFile mid = read_safetensors(d.file("a/iter_8.safetensors"));
  EXPECT_NE(0, std::memcmp(mid.tensors.at("fc1.weight").data.data(), b.tensors.at("fc1.weight").data.data(),
                           mid.tensors.at("fc1.weight").data.size() * sizeof(float)));
}

}  // namespace

TEST(Resume, HalfAndHalfEqualsStraightBitwise) { expect_half_and_half_equals_straight(""); }

TEST(Resume, HalfAndHalfEqualsStraightBitwiseInBf16) { expect_half_and_half_equals_straight(" --set precision=bf16"); }

// The two bf16 kernels of the CPU (oneDNN's bfloat16 ones, float32 ones on
// rounded operands) differ in their products' last bits: a resumed run
// multiplies with those its checkpoint names, whichever it would measure.
TEST(Resume, ResumedRunTakesTheBf16KernelsOfItsCheckpoint) {
  if (!dnnl_uses_avx512()) GTEST_SKIP() << "one bf16 kernel choice on this CPU: no oneDNN bfloat16 kernels";
  for (const std::string kernels : {"onednn", "float32"}) {
    SCOPED_TRACE(kernels);
    expect_half_and_half_equals_straight(" --set precision=bf16", kernels);
  }
}

TEST(CudaResume, HalfAndHalfEqualsStraightBitwise) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_half_and_half_equals_straight(" --set device=cuda");
}

TEST(CudaResume, HalfAndHalfEqualsStraightBitwiseInBf16) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_half_and_half_equals_straight(" --set device=cuda --set precision=bf16");
}

}  // namespace poseidon::testing
