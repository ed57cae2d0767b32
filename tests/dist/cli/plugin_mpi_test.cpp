// A plug-in layer under `mpirun -np 2` with hybrid communication: every rank
// loads the config's plug-in, training resumes bit for bit from a snapshot,
// and a rank that lacks the plug-in fails before any iteration.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/safetensors.h"
#include "tests/dist/cli/mpi_runner.h"

namespace poseidon::testing {
namespace {

class PluginMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir.write("model.yaml", R"(name: m
inputs: {data: [12], label: []}
layers:
  - {name: fc1, type: fc, num_output: 16}
  - {name: act, type: swish}
  - {name: fc2, type: fc, num_output: 4}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)");
    config = dir.write("train.yaml", "plugins: " + std::string(POSEIDON_PLUGIN_DIR) +
                                         "/libplugin_swish.so\nmodel: model.yaml\nseed: 5\nthreads: 1\ndata:\n"
                                         "  train: {source: synthetic, shape: [12], num_classes: 4, size: 40, "
                                         "batch_size: 4, shuffle: true}\n"
                                         "solver: {lr: 0.05, momentum: 0.9, max_iter: 10}\n"
                                         "train: {display: 1, snapshot_interval: 5}\n"
                                         "dist: {scheme: hybrid, block_bytes: 256, bucket_bytes: 256}\n");
  }
  TempDir dir;
  std::string config;
};

TEST_F(PluginMpi, HybridTwoRanksResumeBitForBit) {
  const std::string train = "train " + config + " --quiet";
  CliResult straight = run_mpi(2, train + " --set train.output_dir=" + dir.file("a"));
  ASSERT_EQ(straight.status, 0) << straight.err;
  CliResult resumed =
      run_mpi(2, train + " --set train.output_dir=" + dir.file("b") + " --resume " + dir.file("a/iter_5.safetensors"));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  SafetensorsFile a = read_safetensors(dir.file("a/final.safetensors"));
  SafetensorsFile b = read_safetensors(dir.file("b/final.safetensors"));
  ASSERT_TRUE(a.tensors.count("act.beta"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, ta] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    ASSERT_EQ(ta.data.size(), b.tensors.at(name).data.size()) << name;
    EXPECT_EQ(0, std::memcmp(ta.data.data(), b.tensors.at(name).data.data(), ta.data.size() * sizeof(float)))
        << name << " differs";
  }
  SafetensorsFile mid = read_safetensors(dir.file("a/iter_5.safetensors"));
  EXPECT_NE(mid.tensors.at("act.beta").data.at(0), b.tensors.at("act.beta").data.at(0)) << "beta did not train";
}

TEST_F(PluginMpi, ARankWithoutThePluginFailsBeforeAnyIteration) {
  // Rank 1 reads a config naming a plug-in that is not there.
  std::string text;
  std::stringstream in;
  in << std::ifstream(config).rdbuf();
  text = in.str();
  std::string broken = dir.write("broken.yaml", text.replace(text.find(POSEIDON_PLUGIN_DIR), 0, "/missing"));
  const std::string out = " --set train.output_dir=" + dir.file("c");
  CliResult r = run_mpi(1, "train " + config + out + " : -np 1 " + POSEIDON_BINARY + " train " + broken + out);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("libplugin_swish.so': file not found"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("iter 1/"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("c/final.safetensors")));
}

}  // namespace
}  // namespace poseidon::testing
