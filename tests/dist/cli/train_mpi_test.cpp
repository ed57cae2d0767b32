// `mpirun -np N poseidon train`: each rank trains on its shard, rank 0 alone
// writes metrics and checkpoints, test results are summed over the ranks,
// and a run continues from a checkpoint on another rank count. The final
// parameters and optimizer state equal those of one process trained on the
// combined batch, to relative 1e-4 (L2 norm per tensor).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/safetensors.h"
#include "layers/dnnl_support.h"
#include "tests/dist/cli/mpi_runner.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// A small conv net without dropout on 48 random training and 30 test images.
// bf16 runs multiply with oneDNN's bfloat16 kernels where the CPU has them,
// in every process: the one-process run measures its own choice
// (layers/dnnl_support.h), and one that chose otherwise under load would
// end elsewhere than the ranks.
class MpiTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("POSEIDON_CPU_BF16_KERNELS", "onednn", 1);
    write_idx_dataset(dir.file("train.idx"), dir.file("train_labels.idx"), 48, 10, 5);
    write_idx_dataset(dir.file("test.idx"), dir.file("test_labels.idx"), 30, 10, 6);
    dir.write("model.yaml", R"(name: tiny
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5, stride: 2}
  - {name: relu1, type: relu}
  - {name: pool1, type: pool, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 16}
  - {name: relu2, type: relu}
  - {name: fc2, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
  - {name: accuracy, type: accuracy, inputs: [fc2, label]}
)");
    config = dir.write("config.yaml",
                       "model: model.yaml\nseed: 3\nthreads: 1\ndata:\n"
                       "  train: {source: idx, images: " +
                           dir.file("train.idx") + ", labels: " + dir.file("train_labels.idx") +
                           ", shuffle: true}\n"
                           "  test: {source: idx, images: " +
                           dir.file("test.idx") + ", labels: " + dir.file("test_labels.idx") +
                           ", batch_size: 100}\n"
                           "solver: {lr: 0.01, momentum: 0.9, weight_decay: 0.001, max_iter: 12}\n"
                           "train: {display: 1, snapshot_interval: 5}\n"
                           "dist: {block_bytes: 1024, bucket_bytes: 1024}\n");
  }

  // 48 examples at a combined batch of 8: 6 iterations an epoch, so 12 cross an epoch boundary.
  std::string train_args(int per_rank_batch, const std::string& out, const std::string& extra = "") const {
    return "train " + config + " --quiet --set data.train.batch_size=" + std::to_string(per_rank_batch) +
           " --set train.output_dir=" + dir.file(out) + " " + extra;
  }

  TempDir dir;
  std::string config;
};

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// Every tensor of `got` (parameters and optimizer state, which holds `state_entry`) matches `want`.
void expect_same_state(const std::string& got, const std::string& want,
                       const std::string& state_entry = "optimizer.fc1.weight.momentum_buffer") {
  SafetensorsFile a = read_safetensors(got), b = read_safetensors(want);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  EXPECT_GT(a.tensors.count(state_entry), 0u);
  for (const auto& [name, t] : b.tensors) {
    ASSERT_TRUE(a.tensors.count(name)) << name << " missing from " << got;
    ASSERT_EQ(a.tensors.at(name).shape, t.shape) << name;
    EXPECT_LE(relative_l2(a.tensors.at(name).data, t.data), 1e-4) << name;
  }
  EXPECT_EQ(a.metadata.at("iteration"), b.metadata.at("iteration"));
}

std::vector<nlohmann::json> records(const std::string& metrics, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == type) out.push_back(j);
  }
  return out;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST_F(MpiTrain, TwoRanksMatchOneProcessOnTheCombinedBatch) {
  const double before = unix_now();
  CliResult single = run_poseidon(train_args(8, "single"));
  ASSERT_EQ(single.status, 0) << single.err;
  const double after = unix_now();
  // Each train record says when it was written, by the wall clock and since training began.
  auto single_train = records(dir.file("single/metrics.jsonl"), "train");
  ASSERT_FALSE(single_train.empty());
  for (const auto& r : single_train) {
    EXPECT_GE(r["unix_time"].get<double>(), before);
    EXPECT_LE(r["unix_time"].get<double>(), after);
    const double wall = r["unix_time"].get<double>() - single_train[0]["unix_time"].get<double>();
    const double since_start = r["elapsed_s"].get<double>() - single_train[0]["elapsed_s"].get<double>();
    EXPECT_NEAR(wall, since_start, 0.05);
  }
  for (const std::string scheme : {"ps", "allreduce"}) {
    SCOPED_TRACE(scheme);
    CliResult mpi = run_mpi(
        2, train_args(4, scheme, "--set dist.scheme=" + scheme + " --timeline " + dir.file(scheme + "/trace.json")));
    ASSERT_EQ(mpi.status, 0) << mpi.err;
    expect_same_state(dir.file(scheme + "/final.safetensors"), dir.file("single/final.safetensors"));

    // Rank 0 alone writes the log; the test covered both shards of the test set.
    auto train = records(dir.file(scheme + "/metrics.jsonl"), "train");
    auto test = records(dir.file(scheme + "/metrics.jsonl"), "test");
    ASSERT_EQ(train.size(), 12u);
    EXPECT_GT(train.back()["comm_bytes_sent"].get<double>(), 0);
    // Every record times its iteration's transfers, the first included (it once read 0 s, 100% hidden).
    for (const auto& r : train) EXPECT_GT(r["comm_s"].get<double>(), 0) << r.dump();
    EXPECT_TRUE(records(dir.file(scheme + "/metrics.jsonl"), "plan").empty()) << "only hybrid plans with link figures";
    ASSERT_EQ(test.size(), 1u);
    EXPECT_EQ(test[0]["examples"], 30);
    auto single_test = records(dir.file("single/metrics.jsonl"), "test");
    EXPECT_NEAR(test[0]["loss"].get<double>(), single_test[0]["loss"].get<double>(),
                1e-4 * std::abs(single_test[0]["loss"].get<double>()));

    // A trace per rank: 12 iterations of 8 layers forward, 7 backward (not accuracy), and one
    // transfer per unit (PS: each of the 6 parameters; all-reduce: 1 KiB buckets) and iteration,
    // each unit on a lane of its own, its transfers one after another; lanes for the data
    // waits (one a batch), the updates, the test at the end and the checkpoints (iterations 5
    // and 10, and the final one).
    for (int rank = 0; rank < 2; ++rank) {
      std::ifstream in(dir.file(scheme + "/trace.rank" + std::to_string(rank) + ".json"));
      ASSERT_TRUE(in) << "no timeline of rank " << rank;
      const auto trace = nlohmann::json::parse(in);
      std::map<std::string, int> spans;
      std::map<int, std::string> lane_names;
      std::map<int, std::vector<std::pair<double, double>>> unit_spans;  // lane -> (start, end)
      std::map<std::string, std::set<int>> lanes_of;                     // category -> lanes
      for (const auto& e : trace["traceEvents"]) {
        if (e["ph"] == "M" && e["name"] == "thread_name") lane_names[e["tid"]] = e["args"]["name"];
        if (e["ph"] != "X") continue;
        const std::string category = e["cat"];
        ++spans[category];
        lanes_of[category].insert(e["tid"].get<int>());
        if (category == scheme)
          unit_spans[e["tid"]].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
      }
      EXPECT_EQ(spans["forward"], 12 * 8);
      EXPECT_EQ(spans["backward"], 12 * 7);
      EXPECT_GT(spans[scheme], 0);
      EXPECT_EQ(spans[scheme] % 12, 0);
      if (scheme == "ps") {
        EXPECT_EQ(spans["ps"], 12 * 6);
        EXPECT_EQ(unit_spans.size(), 6u);
      }
      for (auto& [lane, list] : unit_spans) {
        EXPECT_EQ(list.size(), 12u) << lane_names[lane];
        EXPECT_EQ(lane_names[lane].rfind("comm " + scheme + ": ", 0), 0u) << lane_names[lane];
        std::sort(list.begin(), list.end());
        for (size_t i = 1; i < list.size(); ++i) EXPECT_GE(list[i].first, list[i - 1].second) << lane_names[lane];
      }
      EXPECT_EQ(spans["batch"], 12);
      EXPECT_GT(spans["update"], 0);
      EXPECT_EQ(spans["test"], 1);
      EXPECT_EQ(spans["checkpoint"], 3);
      for (const auto& [category, lane] : {std::pair{"batch", "data"}, std::pair{"update", "update"},
                                           std::pair{"test", "test"}, std::pair{"checkpoint", "checkpoint"}}) {
        ASSERT_EQ(lanes_of[category].size(), 1u) << category;
        EXPECT_EQ(lane_names[*lanes_of[category].begin()].rfind(lane, 0), 0u) << category;
      }
    }
  }
}

// A GPU net is distributed through a host mirror (dist/gpu/host_staging_sink.h);
// on the CPU `dist.host_staging` runs that path, which must change no number:
// the same parameters, optimizer state and test loss, bit for bit, for every
// scheme (SFB copies the factors, PS and all-reduce the gradients), also
// when resuming.
TEST_F(MpiTrain, HostStagingChangesNoNumber) {
  for (const std::string scheme : {"ps", "sfb", "allreduce"}) {
    SCOPED_TRACE(scheme);
    const std::string set = "--set dist.scheme=" + scheme;
    CliResult direct = run_mpi(2, train_args(4, scheme + "_direct", set));
    ASSERT_EQ(direct.status, 0) << direct.err;
    CliResult staged = run_mpi(2, train_args(4, scheme + "_staged", set + " --set dist.host_staging=true"));
    ASSERT_EQ(staged.status, 0) << staged.err;
    SafetensorsFile a = read_safetensors(dir.file(scheme + "_staged/final.safetensors"));
    SafetensorsFile b = read_safetensors(dir.file(scheme + "_direct/final.safetensors"));
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (const auto& [name, t] : b.tensors) {
      ASSERT_TRUE(a.tensors.count(name)) << name;
      EXPECT_EQ(a.tensors.at(name).data, t.data) << name;
    }
    auto test_direct = records(dir.file(scheme + "_direct/metrics.jsonl"), "test");
    auto test_staged = records(dir.file(scheme + "_staged/metrics.jsonl"), "test");
    ASSERT_EQ(test_staged.size(), 1u);
    EXPECT_EQ(test_staged[0]["loss"], test_direct[0]["loss"]);
  }
  CliResult resumed = run_mpi(2, train_args(4, "ps_resumed",
                                            "--set dist.scheme=ps --set dist.host_staging=true --resume " +
                                                dir.file("ps_direct/iter_5.safetensors")));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  SafetensorsFile a = read_safetensors(dir.file("ps_resumed/final.safetensors"));
  SafetensorsFile b = read_safetensors(dir.file("ps_direct/final.safetensors"));
  for (const auto& [name, t] : b.tensors) EXPECT_EQ(a.tensors.at(name).data, t.data) << name;
}

// bf16 (core/precision.h) distributes as float32 does: two ranks end where
// one process on the combined batch does, to the same 1e-4, under SFB (whose
// factors are rounded to bfloat16 as the fully connected layer reads them,
// so the rebuild sums the layer's own products) and hybrid.
TEST_F(MpiTrain, Bf16TwoRanksMatchOneBf16Process) {
  const std::string bf16 = "--set precision=bf16";
  CliResult single = run_poseidon(train_args(8, "single", bf16));
  ASSERT_EQ(single.status, 0) << single.err;
  for (const std::string scheme : {"hybrid", "sfb"}) {
    SCOPED_TRACE(scheme);
    CliResult mpi = run_mpi(2, train_args(4, scheme, bf16 + " --set dist.scheme=" + scheme));
    ASSERT_EQ(mpi.status, 0) << mpi.err;
    expect_same_state(dir.file(scheme + "/final.safetensors"), dir.file("single/final.safetensors"));
  }
}

// The ranks multiply bf16 with rank 0's CPU kernels, whatever each would
// choose alone: two ranks told otherwise each end where one process with
// rank 0's kernels does (the two kernels' products differ in their last
// bits, which over 12 iterations moves conv1 by about 1e-3).
TEST_F(MpiTrain, RanksMultiplyWithRankZerosBf16Kernels) {
  if (!dnnl_uses_avx512()) GTEST_SKIP() << "one bf16 kernel choice on this CPU: no oneDNN bfloat16 kernels";
  const std::string args = "--set precision=bf16 --set dist.scheme=hybrid";
  for (const std::string first : {"onednn", "float32"}) {
    SCOPED_TRACE(first);
    const std::string other = first == "onednn" ? "float32" : "onednn";
    setenv("POSEIDON_CPU_BF16_KERNELS", first.c_str(), 1);
    CliResult single = run_poseidon(train_args(8, first + "_single", "--set precision=bf16"));
    ASSERT_EQ(single.status, 0) << single.err;
    CliResult mpi = run_mpi_each({"POSEIDON_CPU_BF16_KERNELS=" + first, "POSEIDON_CPU_BF16_KERNELS=" + other},
                                 train_args(4, first + "_ranks", args));
    ASSERT_EQ(mpi.status, 0) << mpi.err;
    expect_same_state(dir.file(first + "_ranks/final.safetensors"), dir.file(first + "_single/final.safetensors"));
  }
}

// A layer that keeps float32 in a bf16 run (its own precision key) is
// distributed as its precision says: SFB sends fc1's factors unrounded and
// fc2's rounded, and two ranks still end where one process does.
TEST_F(MpiTrain, MixedPrecisionTwoRanksMatchOneProcess) {
  const std::string mixed = "--set precision=bf16 --set net.layers.fc1.precision=fp32";
  CliResult single = run_poseidon(train_args(8, "mixed_single", mixed));
  ASSERT_EQ(single.status, 0) << single.err;
  CliResult bf16 = run_poseidon(train_args(8, "bf16_single", "--set precision=bf16"));
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  // The key changed the run: fc1's float32 products end elsewhere than its bf16 ones.
  EXPECT_NE(read_safetensors(dir.file("mixed_single/final.safetensors")).tensors.at("fc1.weight").data,
            read_safetensors(dir.file("bf16_single/final.safetensors")).tensors.at("fc1.weight").data);
  for (const std::string scheme : {"hybrid", "sfb"}) {
    SCOPED_TRACE(scheme);
    CliResult mpi = run_mpi(2, train_args(4, "mixed_" + scheme, mixed + " --set dist.scheme=" + scheme));
    ASSERT_EQ(mpi.status, 0) << mpi.err;
    expect_same_state(dir.file("mixed_" + scheme + "/final.safetensors"), dir.file("mixed_single/final.safetensors"));
  }
}

// HybComm plans with the link's figures (given here, so not probed) and the
// GEMM rate of the SFB rebuild (measured); the log's plan record holds them
// (bench/scaling.py reads the GEMM rate from it).
TEST_F(MpiTrain, HybridRecordsTheFiguresItPlannedWith) {
  CliResult mpi = run_mpi(2, train_args(4, "hybrid",
                                        "--set dist.scheme=hybrid --set dist.bandwidth_gbps=3 "
                                        "--set dist.latency_us=40"));
  ASSERT_EQ(mpi.status, 0) << mpi.err;
  auto plan = records(dir.file("hybrid/metrics.jsonl"), "plan");
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].at("bandwidth_gbps").get<double>(), 3);
  EXPECT_EQ(plan[0].at("latency_us").get<double>(), 40);
  EXPECT_GT(plan[0].at("gemm_gflops").get<double>(), 0);
}

TEST_F(MpiTrain, ResumesOnAnotherRankCount) {
  CliResult straight = run_poseidon(train_args(8, "straight"));
  ASSERT_EQ(straight.status, 0) << straight.err;
  // Two ranks resume one process's snapshot, and one process resumes two ranks' snapshot.
  CliResult two =
      run_mpi(2, train_args(4, "two", "--set dist.scheme=ps --resume " + dir.file("straight/iter_5.safetensors")));
  ASSERT_EQ(two.status, 0) << two.err;
  expect_same_state(dir.file("two/final.safetensors"), dir.file("straight/final.safetensors"));
  CliResult one = run_poseidon(train_args(8, "one", "--resume " + dir.file("two/iter_10.safetensors")));
  ASSERT_EQ(one.status, 0) << one.err;
  expect_same_state(dir.file("one/final.safetensors"), dir.file("straight/final.safetensors"));
}

// Adam's moments and step counts, sharded over the parameter server's
// owners, are gathered into checkpoints and spread again on resume.
TEST_F(MpiTrain, AdamStateResumesOnAnotherRankCount) {
  std::ifstream sgd(config);
  std::stringstream text;
  text << sgd.rdbuf();
  std::string adam_config = text.str();
  adam_config.replace(adam_config.find("momentum: 0.9"), 13, "type: adam");
  config = dir.write("adam.yaml", adam_config);
  CliResult straight = run_poseidon(train_args(8, "straight"));
  ASSERT_EQ(straight.status, 0) << straight.err;
  CliResult two =
      run_mpi(2, train_args(4, "two", "--set dist.scheme=ps --resume " + dir.file("straight/iter_5.safetensors")));
  ASSERT_EQ(two.status, 0) << two.err;
  expect_same_state(dir.file("two/final.safetensors"), dir.file("straight/final.safetensors"),
                    "optimizer.fc1.weight.exp_avg_sq");
  EXPECT_EQ(read_safetensors(dir.file("two/iter_10.safetensors")).tensors.at("optimizer.fc1.weight.step").data,
            std::vector<float>{10.f});
  CliResult one = run_poseidon(train_args(8, "one", "--resume " + dir.file("two/iter_10.safetensors")));
  ASSERT_EQ(one.status, 0) << one.err;
  expect_same_state(dir.file("one/final.safetensors"), dir.file("straight/final.safetensors"),
                    "optimizer.fc1.weight.exp_avg_sq");
}

}  // namespace
}  // namespace poseidon::testing
