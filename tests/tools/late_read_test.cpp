// Reading each iteration's loss and finite verdict after the next iteration
// is issued (tools/cli/trainer.h) changes nothing a user sees: a run that
// displays every few iterations reports, saves and resumes exactly what a
// run that reads every iteration at once (display: 1) does, and a run that
// turns non-finite between two displays stops at the same iteration with the
// same message and the same saved state. The model has batch norm (running
// statistics, restored on a stop) and dropout (the RNG). On a GPU the same,
// where a non-finite iteration is found through the device's flag and run
// again to say where (CudaLateRead, in tools/gpu_check.sh).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "gpu_required.h"
#include "tools/tiny_bn_run.h"

namespace poseidon::testing {
namespace {

std::string write_config(const TempDir& d, const std::string& solver) {
  return write_tiny_bn_run(d, 4, "solver: " + solver + "\n");
}

// The metrics file's train records by iteration.
std::map<int64_t, nlohmann::json> train_records(const std::string& path) {
  std::map<int64_t, nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line);
    if (r.at("type") == "train") out[r.at("iter").get<int64_t>()] = r;
  }
  return out;
}

void expect_late_reads_report_as_at_once(const std::string& device) {
  TempDir d;
  const std::string config = write_config(d, "{lr: 0.05, momentum: 0.9, lr_policy: cosine, max_iter: 14}");
  const std::string run = "train " + config + " --quiet --set train.snapshot_interval=6 --set device=" + device;
  CliResult at_once = run_poseidon(run + " --set train.display=1 --set train.output_dir=" + d.file("a"));
  ASSERT_EQ(at_once.status, 0) << at_once.err;
  CliResult late = run_poseidon(run + " --set train.display=4 --set train.output_dir=" + d.file("b"));
  ASSERT_EQ(late.status, 0) << late.err;

  const auto a = train_records(d.file("a/metrics.jsonl"));
  const auto b = train_records(d.file("b/metrics.jsonl"));
  ASSERT_EQ(a.size(), 14u);
  ASSERT_EQ(b.size(), 4u);  // iterations 4, 8, 12 and the last, 14
  for (const auto& [iter, rb] : b) {
    ASSERT_TRUE(a.count(iter)) << iter;
    const nlohmann::json& ra = a.at(iter);
    // The smoothed loss covers every iteration, those read late included.
    for (const char* key : {"epoch", "loss", "loss_avg", "lr"}) EXPECT_EQ(ra.at(key), rb.at(key)) << key << " at " << iter;
  }
  expect_same_checkpoint(d.file("a/iter_6.safetensors"), d.file("b/iter_6.safetensors"));
  expect_same_checkpoint(d.file("a/iter_12.safetensors"), d.file("b/iter_12.safetensors"));
  expect_same_checkpoint(d.file("a/final.safetensors"), d.file("b/final.safetensors"));

  // Resumed from a snapshot taken between displays, bit for bit the same end.
  CliResult resumed = run_poseidon(run + " --set train.display=4 --set train.output_dir=" + d.file("c") +
                                   " --resume " + d.file("b/iter_6.safetensors"));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  expect_same_checkpoint(d.file("a/final.safetensors"), d.file("c/final.safetensors"));
}

void expect_late_non_finite_stops_as_at_once(const std::string& device) {
  TempDir d;
  const std::string config = write_config(d, "{lr: 1e20, momentum: 0.9, max_iter: 12}");
  const std::string run = "train " + config + " --quiet --set device=" + device;
  CliResult at_once = run_poseidon(run + " --set train.display=1 --set train.output_dir=" + d.file("a"));
  CliResult late = run_poseidon(run + " --set train.display=100 --set train.output_dir=" + d.file("b"));
  ASSERT_EQ(at_once.status, 2) << at_once.err;
  ASSERT_EQ(late.status, 2) << late.err;
  const std::regex where("iteration ([0-9]+) \\(epoch 0\\): (non-finite [^;]+); the state before this iteration is "
                         "saved in (\\S+iter_([0-9]+)\\.safetensors)");
  std::smatch ma, mb;
  ASSERT_TRUE(std::regex_search(at_once.err, ma, where)) << at_once.err;
  ASSERT_TRUE(std::regex_search(late.err, mb, where)) << late.err;
  // Found between displays (not at the last iteration, which is read at once).
  EXPECT_LT(std::stoi(mb[1]), 12);
  EXPECT_EQ(ma[1], mb[1]);
  EXPECT_EQ(ma[2], mb[2]);  // the same layer, tensor, index and value
  EXPECT_NE(mb[2].str().find("layer '"), std::string::npos) << mb[2];
  expect_same_checkpoint(ma[3], mb[3]);

  // Resumed from the saved state, the late run repeats the failure exactly.
  CliResult again = run_poseidon(run + " --set train.display=100 --set train.output_dir=" + d.file("c") +
                                 " --resume " + mb[3].str());
  ASSERT_EQ(again.status, 2) << again.err;
  std::smatch mc;
  ASSERT_TRUE(std::regex_search(again.err, mc, where)) << again.err;
  EXPECT_EQ(mc[1], mb[1]);
  EXPECT_EQ(mc[2], mb[2]);
}

}  // namespace

TEST(LateRead, ReportsSavesAndResumesAsReadingEveryIterationAtOnce) { expect_late_reads_report_as_at_once("cpu"); }

TEST(LateRead, NonFiniteFoundLateStopsWhereReadingAtOnceStops) { expect_late_non_finite_stops_as_at_once("cpu"); }

TEST(CudaLateRead, ReportsSavesAndResumesAsReadingEveryIterationAtOnce) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_late_reads_report_as_at_once("cuda");
}

TEST(CudaLateRead, NonFiniteFoundLateStopsWhereReadingAtOnceStops) {
  POSEIDON_SKIP_WITHOUT_GPU();
  expect_late_non_finite_stops_as_at_once("cuda");
}

}  // namespace poseidon::testing
