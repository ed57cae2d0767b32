// Tar shards under `mpirun -np 4 poseidon train`: each rank reads its slice
// of the shards, and a run resumed from a mid-run snapshot ends with the
// same parameters and optimizer state, bit for bit, as the run without the
// stop.
#include <gtest/gtest.h>

#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "core/safetensors.h"
#include "tests/dist/cli/mpi_runner.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

TEST(MpiShards, FourRanksResumeBitForBit) {
  TempDir dir;
  for (int i = 0; i < 16; ++i) {
    const std::string path = dir.file("images/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".png");
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    ASSERT_TRUE(cv::imwrite(path, cv::Mat(10, 10, CV_8UC3, cv::Scalar(i * 15, 255 - i * 15, (i % 2) * 200))));
  }
  CliResult r =
      run_poseidon("data shard --folder " + dir.file("images") + " -o " + dir.file("shards/train") + " --per-shard 2");
  ASSERT_EQ(r.status, 0) << r.err;
  dir.write("model.yaml",
            "name: tiny\ninputs: {data: [3, 8, 8], label: []}\nlayers:\n"
            "  - {name: fc1, type: fc, inputs: data, num_output: 2}\n"
            "  - {name: loss, type: softmax_loss, inputs: [fc1, label]}\n");
  // 16 examples, 2 per rank a batch: 2 iterations an epoch; 6 cross two epoch boundaries.
  const std::string config =
      dir.write("config.yaml",
                "model: model.yaml\nseed: 3\nthreads: 1\ndata:\n"
                "  train: {source: tar_shards, shards: shards/train.json, random_resized_crop: 8, mirror: true, "
                "shuffle_buffer: 3, batch_size: 2}\n"
                "solver: {lr: 0.1, momentum: 0.9, max_iter: 6}\ntrain: {display: 0, snapshot_interval: 3}\n");
  r = run_mpi(4, "train " + config + " --quiet --set train.output_dir=" + dir.file("straight"));
  ASSERT_EQ(r.status, 0) << r.err;
  r = run_mpi(4, "train " + config + " --quiet --set train.output_dir=" + dir.file("resumed") + " --resume " +
                     dir.file("straight/iter_3.safetensors"));
  ASSERT_EQ(r.status, 0) << r.err;
  const SafetensorsFile a = read_safetensors(dir.file("resumed/final.safetensors"));
  const SafetensorsFile b = read_safetensors(dir.file("straight/final.safetensors"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  EXPECT_GT(b.tensors.count("optimizer.fc1.weight.momentum_buffer"), 0u);
  for (const auto& [name, t] : b.tensors) {
    ASSERT_TRUE(a.tensors.count(name)) << name;
    EXPECT_EQ(a.tensors.at(name).data, t.data) << name << " differs after the resume";
  }
  // The run moved the parameters: the comparison is not of two untouched models.
  const SafetensorsFile start = read_safetensors(dir.file("straight/iter_3.safetensors"));
  EXPECT_NE(start.tensors.at("fc1.weight").data, b.tensors.at("fc1.weight").data);
}

}  // namespace
}  // namespace poseidon::testing
