// `poseidon trace merge`: the per-rank traces of `train --timeline` become
// one trace with a process per rank, each shifted by its file's wall-clock
// origin so that the ranks share one time axis; two files of one rank are
// refused.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "dist/runtime/timeline.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// Writes rank `rank`'s trace of run.json in d, with one span 1 ms after its start.
void write_rank_trace(const TempDir& d, int rank) {
  dist::Timeline timeline(rank);
  const auto now = dist::Timeline::Clock::now();
  timeline.add("step", "compute", dist::Timeline::compute, now + std::chrono::milliseconds(1),
               now + std::chrono::milliseconds(2));
  timeline.write(dist::Timeline::path_for_rank(d.file("run.json"), rank, 2));
}

TEST(TraceMerge, RanksBecomeProcessesOnOneTimeAxis) {
  TempDir d;
  write_rank_trace(d, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 1 starts 50 ms later
  write_rank_trace(d, 1);
  CliResult r = run_poseidon("trace merge " + d.file("run.json") + " -o " + d.file("all.json"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("2 traces, 2 processes"), std::string::npos) << r.out;

  std::ifstream in(d.file("all.json"));
  const nlohmann::json merged = nlohmann::json::parse(in);
  std::map<int, double> step_ts;
  std::map<int, std::string> process_name;
  for (const auto& e : merged["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "step") step_ts[e["pid"].get<int>()] = e["ts"].get<double>();
    if (e["ph"] == "M" && e["name"] == "process_name") process_name[e["pid"]] = e["args"]["name"];
  }
  EXPECT_EQ(process_name[0], "rank 0");
  EXPECT_EQ(process_name[1], "rank 1");
  ASSERT_EQ(step_ts.size(), 2u);
  // Each file has its step at 1 ms; on one axis rank 1's is 50 ms or more later.
  EXPECT_GE(step_ts[1] - step_ts[0], 50e3);
  EXPECT_LT(step_ts[1] - step_ts[0], 10e6);
}

TEST(TraceMerge, TheSameRankTwiceIsRefused) {
  TempDir d;
  write_rank_trace(d, 0);
  const std::string rank0 = dist::Timeline::path_for_rank(d.file("run.json"), 0, 2);
  CliResult r = run_poseidon("trace merge " + rank0 + " " + rank0 + " -o " + d.file("all.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("process 0 is in " + rank0 + " too"), std::string::npos) << r.err;

  CliResult missing = run_poseidon("trace merge " + d.file("other.json") + " -o " + d.file("all.json"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("other.json: no such trace, nor per-rank traces"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace poseidon::testing
