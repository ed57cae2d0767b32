// `cuda_graph` in a training config (core/graphed_step.h): on a GPU, a run
// whose steady steps are captured and replayed as a CUDA graph saves, bit
// for bit, what the same run with `cuda_graph: off` saves, in float32 and
// bf16, through a test at another batch in between (which discards the
// graph and captures it again), and the log says which it did. Anything
// but auto or off is a config error naming the key. The GPU tests run in
// tools/gpu_check.sh and skip without a GPU.
#include <gtest/gtest.h>

#include "gpu_required.h"
#include "tools/tiny_bn_run.h"

namespace poseidon::testing {
namespace {

std::string write_config(const TempDir& d) {
  return write_tiny_bn_run(d, 7,
                           "  test: {source: idx, images: " + d.file("img.idx") + ", labels: " + d.file("lbl.idx") +
                               ", batch_size: 10}\n"
                               "solver: {type: adamw, lr: 0.01, lr_policy: cosine, max_iter: 20}\n"
                               "train: {display: 5, test_interval: 10, test_iters: 2}\n",
                           "  - {name: accuracy, type: accuracy, inputs: [fc2, label]}\n");
}

void expect_graphed_run_equals_plain(const std::string& sets) {
  TempDir d;
  const std::string run = "train " + write_config(d) + " --set device=cuda" + sets;
  CliResult plain = run_poseidon(run + " --set cuda_graph=off --set train.output_dir=" + d.file("plain"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(plain.err.find("cuda graph: steps run uncaptured: cuda_graph is off"), std::string::npos) << plain.err;
  CliResult graphed = run_poseidon(run + " --set train.output_dir=" + d.file("graphed"));
  ASSERT_EQ(graphed.status, 0) << graphed.err;
  EXPECT_NE(graphed.err.find("cuda graph: the training step is captured and replayed from here"), std::string::npos)
      << graphed.err;
  EXPECT_EQ(graphed.err.find("capture failed"), std::string::npos) << graphed.err;
  expect_same_checkpoint(d.file("plain/final.safetensors"), d.file("graphed/final.safetensors"));
}

TEST(CudaGraphRun, SavesWhatAnUncapturedRunSaves) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_graphed_run_equals_plain("");
}

TEST(CudaGraphRun, SavesWhatAnUncapturedRunSavesInBf16) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_graphed_run_equals_plain(" --set precision=bf16");
}

TEST(CudaGraphConfig, AnythingButAutoOrOffIsAConfigError) {
  TempDir d;
  CliResult r =
      run_poseidon("train " + write_config(d) + " --set cuda_graph=always --set train.output_dir=" + d.file("o"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("cuda_graph"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expected one of auto, off, found 'always'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace poseidon::testing
