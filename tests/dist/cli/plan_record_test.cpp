// Reproducible runs. Every scheme: a repeated and a resumed run end where the
// first ended, bit for bit. Hybrid plans: the link figures a distributed run planned with
// are recorded (<output_dir>/plan.json, every checkpoint's metadata), and a
// later start reuses them: a second run of the same config, a run pinned to
// the plan file (dist.plan_file, `poseidon plan --out`) and a resumed run
// compute, bit for bit, what the first run computed. A plan file that does
// not fit the model stops the run with exit 2 before any work.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safetensors.h"
#include "tests/dist/cli/mpi_runner.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// Every tensor of the two checkpoints equal bit for bit, and (a hybrid run's) link figures recorded alike.
void expect_identical(const std::string& got, const std::string& want, bool linked = true) {
  const SafetensorsFile a = read_safetensors(got), b = read_safetensors(want);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : b.tensors) {
    ASSERT_TRUE(a.tensors.count(name)) << name;
    ASSERT_EQ(a.tensors.at(name).data, t.data) << name << " differs between " << got << " and " << want;
  }
  if (!linked) return;
  ASSERT_TRUE(b.metadata.count("dist_link")) << want << " records no link figures";
  EXPECT_EQ(a.metadata.at("dist_link"), b.metadata.at("dist_link"));
}

// The latest start's plan origin (a second start appends to metrics.jsonl).
std::string plan_origin(const std::string& metrics) {
  std::ifstream in(metrics);
  std::string origin;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "plan") origin = j["origin"].get<std::string>();
  }
  return origin;
}

class PlanRecord : public ::testing::Test {
 protected:
  void SetUp() override {
    dir.write("model.yaml", R"(name: small
inputs: {data: [1, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 3, kernel_size: 3}
  - {name: relu1, type: relu}
  - {name: fc1, type: fc, num_output: 24}
  - {name: relu2, type: relu}
  - {name: fc2, type: fc, num_output: 5}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)");
    config = dir.write("config.yaml",
                       "model: model.yaml\nseed: 5\nthreads: 1\n"
                       "data: {train: {source: synthetic, shape: [1, 8, 8], num_classes: 5, size: 64, "
                       "batch_size: 4}}\n"
                       "solver: {lr: 0.05, momentum: 0.9, max_iter: 8}\n"
                       "train: {display: 4, snapshot_interval: 4}\n"
                       "dist: {scheme: hybrid, block_bytes: 256, bucket_bytes: 256}\n");
  }
  std::string train(const std::string& out, const std::string& extra = "") const {
    return "train " + config + " --quiet --set train.output_dir=" + dir.file(out) + " " + extra;
  }
  TempDir dir;
  std::string config;
};

}  // namespace

TEST_F(PlanRecord, RepeatedPinnedAndResumedRunsComputeTheSame) {
  CliResult first = run_mpi(2, train("a"));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(plan_origin(dir.file("a/metrics.jsonl")), "probed at start");
  const std::string record = dir.file("a/plan.json");
  ASSERT_TRUE(std::ifstream(record).good()) << "no plan.json written";
  // Kept aside: the second start of the same config writes over it.
  std::filesystem::copy_file(dir.file("a/final.safetensors"), dir.file("first.safetensors"));

  CliResult again = run_mpi(2, train("a"));
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(plan_origin(dir.file("a/metrics.jsonl")).find("recorded in"), std::string::npos);
  expect_identical(dir.file("a/final.safetensors"), dir.file("first.safetensors"));

  CliResult pinned = run_mpi(2, train("pinned", "--set dist.plan_file=" + record));
  ASSERT_EQ(pinned.status, 0) << pinned.err;
  EXPECT_NE(plan_origin(dir.file("pinned/metrics.jsonl")).find("pinned by"), std::string::npos);
  expect_identical(dir.file("pinned/final.safetensors"), dir.file("first.safetensors"));

  CliResult resumed = run_mpi(2, train("resumed", "--resume " + dir.file("a/iter_4.safetensors")));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(plan_origin(dir.file("resumed/metrics.jsonl")).find("iter_4.safetensors"), std::string::npos);
  expect_identical(dir.file("resumed/final.safetensors"), dir.file("first.safetensors"));

  CliResult given = run_mpi(2, train("given", "--set dist.bandwidth_gbps=1 --set dist.latency_us=50 "
                                              "--set dist.gemm_gflops=20"));
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_EQ(plan_origin(dir.file("given/metrics.jsonl")), "figures given by the config");
}

// Every scheme, with and without WFBP, at 2 and 4 ranks: a second run of the
// same config and a run resumed from its checkpoint end bit for bit where
// the first run ended.
struct Setting {
  std::string scheme;
  bool wfbp;
  int ranks;
};

class Reproducible : public PlanRecord, public ::testing::WithParamInterface<Setting> {};

TEST_P(Reproducible, RepeatedAndResumedRunsComputeTheSame) {
  const Setting& s = GetParam();
  const std::string set = "--set dist.scheme=" + s.scheme + " --set dist.wfbp=" + (s.wfbp ? "true" : "false");
  CliResult first = run_mpi(s.ranks, train("a", set));
  ASSERT_EQ(first.status, 0) << first.err;
  std::filesystem::copy_file(dir.file("a/final.safetensors"), dir.file("first.safetensors"));
  CliResult again = run_mpi(s.ranks, train("a", set));
  ASSERT_EQ(again.status, 0) << again.err;
  expect_identical(dir.file("a/final.safetensors"), dir.file("first.safetensors"), s.scheme == "hybrid");
  CliResult resumed = run_mpi(s.ranks, train("resumed", set + " --resume " + dir.file("a/iter_4.safetensors")));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  expect_identical(dir.file("resumed/final.safetensors"), dir.file("first.safetensors"), s.scheme == "hybrid");
}

std::vector<Setting> settings() {
  std::vector<Setting> out;
  for (const char* scheme : {"ps", "sfb", "allreduce", "hybrid"})
    for (bool wfbp : {true, false})
      for (int ranks : {2, 4}) out.push_back({scheme, wfbp, ranks});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schemes, Reproducible, ::testing::ValuesIn(settings()), [](const auto& info) {
  return info.param.scheme + (info.param.wfbp ? "_wfbp_np" : "_no_wfbp_np") + std::to_string(info.param.ranks);
});

TEST_F(PlanRecord, PlanVerbWritesAFileTrainingPins) {
  const std::string file = dir.file("plan.json");
  CliResult plan = run_poseidon("plan " + config + " --workers 2 --gflops 30 --bandwidth 1 --out " + file);
  ASSERT_EQ(plan.status, 0) << plan.err;
  const auto j = nlohmann::json::parse(std::ifstream(file));
  EXPECT_EQ(j.at("model"), "small");
  EXPECT_EQ(j.at("workers"), 2);
  EXPECT_EQ(j.at("link").at("gemm_gflops"), 30.0);
  ASSERT_EQ(j.at("layers").size(), 3u);  // conv1, fc1, fc2
  CliResult pinned = run_mpi(2, train("pinned", "--set dist.plan_file=" + file));
  ASSERT_EQ(pinned.status, 0) << pinned.err;
  const SafetensorsFile ckpt = read_safetensors(dir.file("pinned/final.safetensors"));
  EXPECT_EQ(nlohmann::json::parse(ckpt.metadata.at("dist_link")).at("gemm_gflops"), 30.0);
}

TEST_F(PlanRecord, PlanFileThatDoesNotFitStopsBeforeAnyWork) {
  dir.write("bad.json", R"({"format": "poseidon-plan-1", "model": "small", "workers": 2, "batch": 4,
    "link": {"bandwidth_gbps": 1, "latency_us": 10, "gemm_gflops": 30},
    "layers": [{"name": "conv1", "scheme": "ps"}, {"name": "fc1", "scheme": "sfb"}]})");
  CliResult r = run_mpi(2, train("bad", "--set dist.plan_file=" + dir.file("bad.json")));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.json: no scheme for layer 'fc2'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(dir.file("bad/final.safetensors")).good());
}

}  // namespace poseidon::testing
