// The numeric guard through the poseidon binary: a learning rate that makes
// training diverge stops it with exit status 2 and a message naming the
// iteration and the first layer whose output turned non-finite, and the
// state saved from before that iteration is a training
// checkpoint that --resume accepts and from which the same failure repeats. (tests/core/finite_check_test.cpp injects
// a NaN into one layer's gradient and checks layer, tensor and resumed numbers.)
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "core/safetensors.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {

TEST(NumericGuardCli, DivergingRunStopsWithStatus2AndAResumableCheckpoint) {
  TempDir d;
  d.write("model.yaml", R"(name: tiny
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5, stride: 2}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 16}
  - {name: relu2, type: relu}
  - {name: fc2, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)");
  const std::string config = d.write("config.yaml",
                                     "model: model.yaml\nseed: 2\nthreads: 1\n"
                                     "data: {train: {source: synthetic, shape: [1, 28, 28], size: 40, batch_size: 8}}\n"
                                     "solver: {lr: 1e20, momentum: 0.9, max_iter: 12}\n"
                                     "train: {display: 1, output_dir: " +
                                         d.file("out") + "}\n");
  CliResult r = run_poseidon("train " + config + " --quiet");
  ASSERT_EQ(r.status, 2) << r.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.err, m,
                        std::regex("iteration ([0-9]+) \\(epoch 0\\): non-finite loss \\((nan|inf|-inf)\\), first "
                                   "in the output of layer '(conv1|relu1|pool1|fc1|relu2|fc2|loss)' \\(blob '\\w+', "
                                   "first at index [0-9]+: (nan|inf|-inf)\\); the state before this iteration is "
                                   "saved in (\\S+iter_([0-9]+)\\.safetensors)")))
      << r.err;
  EXPECT_EQ(std::stoi(m[1]), std::stoi(m[6]) + 1);
  EXPECT_FALSE(std::filesystem::exists(d.file("out/final.safetensors")));

  const std::string saved = m[5];
  SafetensorsFile f = read_safetensors(saved);
  EXPECT_EQ(f.metadata.at("iteration"), m[6].str());
  CliResult resumed =
      run_poseidon("train " + config + " --quiet --resume " + saved + " --set solver.max_iter=" + m[6].str() +
                   " --set train.output_dir=" + d.file("resumed"));
  EXPECT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_TRUE(std::filesystem::exists(d.file("resumed/final.safetensors")));

  // Resumed with the same settings, the run repeats the failing iteration exactly.
  CliResult again =
      run_poseidon("train " + config + " --quiet --resume " + saved + " --set train.output_dir=" + d.file("again"));
  EXPECT_EQ(again.status, 2) << again.err;
  EXPECT_NE(again.err.find("iteration " + m[1].str() + " (epoch 0): non-finite loss (" + m[2].str() +
                           "), first in the output of layer '" + m[3].str() + "'"),
            std::string::npos)
      << again.err;
}

}  // namespace poseidon::testing
