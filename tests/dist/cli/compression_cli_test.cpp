// Compression through `mpirun -np N poseidon train` (LeNet on synthetic
// data): a plan file that pins low-rank compression on three layers and the
// bf16 wire on the fourth trains, its checkpoints carry the low-rank state, and a run
// resumed from one ends bit for bit where the straight run ended; a plan
// file that pins low rank where it cannot run stops before any work.
#include <gtest/gtest.h>

#include "core/safetensors.h"
#include "tests/dist/cli/mpi_runner.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

class CompressionCli : public ::testing::Test {
 protected:
  void SetUp() override {
    config =
        dir.write("config.yaml", "model: " POSEIDON_SOURCE_DIR
                                 "/models/lenet.yaml\nseed: 5\nthreads: 1\n"
                                 "data: {train: {source: synthetic, shape: [1, 28, 28], num_classes: 10, size: 64, "
                                 "batch_size: 4}}\n"
                                 "solver: {lr: 0.02, momentum: 0.9, max_iter: 8}\n"
                                 "train: {display: 4, snapshot_interval: 4}\n"
                                 "dist: {scheme: hybrid, lowrank_rank: 2}\n");
  }
  // The convolutions and fc1 low-rank; fc2 on PS with bf16 pushes.
  std::string plan_file() const {
    return dir.write("plan.json", R"({"format": "poseidon-plan-1", "model": "lenet", "workers": 2, "batch": 4,
 "link": {"bandwidth_gbps": 10, "latency_us": 20, "gemm_gflops": 50},
 "layers": [{"name": "conv1", "scheme": "lowrank"}, {"name": "conv2", "scheme": "lowrank"},
            {"name": "fc1", "scheme": "lowrank"}, {"name": "fc2", "scheme": "ps", "wire": "bf16"}]})");
  }
  std::string train(const std::string& out, const std::string& extra = "") const {
    return "train " + config + " --quiet --set train.output_dir=" + dir.file(out) + " " + extra;
  }
  TempDir dir;
  std::string config;
};

}  // namespace

TEST_F(CompressionCli, ResumedRunEndsBitForBitWithTheStraightOne) {
  const std::string pinned = "--set dist.plan_file=" + plan_file();
  CliResult straight = run_mpi(2, train("a", pinned));
  ASSERT_EQ(straight.status, 0) << straight.err;
  const SafetensorsFile half = read_safetensors(dir.file("a/iter_4.safetensors"));
  for (const char* name : {"compression.conv1.weight.lowrank_q", "compression.fc1.weight.lowrank_error"})
    EXPECT_TRUE(half.tensors.count(name)) << name << " missing from the checkpoint";
  EXPECT_EQ(half.tensors.at("compression.fc1.weight.lowrank_error").shape, (Shape{2, 500, 800}));

  CliResult resumed = run_mpi(2, train("resumed", pinned + " --resume " + dir.file("a/iter_4.safetensors")));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const SafetensorsFile a = read_safetensors(dir.file("a/final.safetensors"));
  const SafetensorsFile b = read_safetensors(dir.file("resumed/final.safetensors"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : a.tensors) {
    ASSERT_TRUE(b.tensors.count(name)) << name;
    EXPECT_EQ(b.tensors.at(name).data, t.data) << name << " differs after resuming";
  }
}

TEST_F(CompressionCli, LowRankWhereItCannotRunStopsBeforeAnyWork) {
  CliResult r = run_mpi(2, train("a", "--set dist.plan_file=" + plan_file() + " --set dist.lowrank_rank=20"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("layer 'conv1' cannot be compressed to rank 20"), std::string::npos) << r.err;
}

}  // namespace poseidon::testing
