// `poseidon data shard`: an image folder becomes tar shards and an index that
// a training config reads (a short run trains on them, its progress line
// showing the share of time waiting for data); a wrong invocation is exit
// status 2 with one line saying what is wrong (`poseidon data placement`
// included, whose listing tests/tools/cluster_own_shards_test.sh checks).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

TEST(DataShardCli, FolderBecomesShardsThatTrainingReads) {
  TempDir d;
  for (int i = 0; i < 5; ++i) {
    const std::string path = d.file("images/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".png");
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    ASSERT_TRUE(cv::imwrite(path, cv::Mat(10, 10, CV_8UC3, cv::Scalar(i * 40, 0, 0))));
  }
  CliResult r =
      run_poseidon("data shard --folder " + d.file("images") + " -o " + d.file("shards/train") + " --per-shard 2");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json index = nlohmann::json::parse(std::ifstream(d.file("shards/train.json")));
  EXPECT_EQ(index["num_classes"], 2);
  ASSERT_EQ(index["shardlist"].size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(index["shardlist"][s]["nsamples"], s < 2 ? 2 : 1);
    EXPECT_TRUE(std::filesystem::exists(d.file("shards/train-00000" + std::to_string(s) + ".tar")));
  }

  d.write("model.yaml",
          "name: tiny\ninputs: {data: [3, 8, 8], label: []}\nlayers:\n"
          "  - {name: fc, type: fc, inputs: data, num_output: 2}\n"
          "  - {name: loss, type: softmax_loss, inputs: [fc, label]}\n");
  d.write("train.yaml",
          "model: model.yaml\nseed: 1\nthreads: 1\n"
          "data:\n  train: {source: tar_shards, shards: shards/train.json, crop: 8, batch_size: 2}\n"
          "solver: {lr: 0.01, max_iter: 3}\ntrain: {display: 1, final_checkpoint: false, output_dir: " +
              d.file("out") + "}\n");
  r = run_poseidon("train " + d.file("train.yaml"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("data wait "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("% of the training time waiting for the data loader"), std::string::npos) << r.err;
}

TEST(DataShardCli, WrongInvocationsExitTwoSayingWhy) {
  TempDir d;
  CliResult r = run_poseidon("data shard -o " + d.file("x"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("give --folder or --list"), std::string::npos) << r.err;
  r = run_poseidon("data shard --folder " + d.file("missing") + " -o " + d.file("x"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(d.file("missing") + ": no such folder"), std::string::npos) << r.err;
  d.write("model.yaml",
          "name: tiny\ninputs: {data: [4], label: []}\nlayers:\n"
          "  - {name: fc, type: fc, inputs: data, num_output: 2}\n"
          "  - {name: loss, type: softmax_loss, inputs: [fc, label]}\n");
  const std::string config = d.write("synthetic.yaml",
                                     "model: model.yaml\ndata:\n  train: {source: synthetic, shape: [4], size: 8, "
                                     "batch_size: 2}\nsolver: {lr: 0.1, max_iter: 2}\n");
  r = run_poseidon("data placement " + config + " --ranks 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(config + ": data.train: poseidon data placement lists tar shards; expected source: tar_shards"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace poseidon::testing
