// The all-reduce schedules (dist/schemes/allreduce_schedule.h) run in one process:
// every rank's steps carried out tag by tag on P buffers (each send matched
// to exactly one receive of the same size), for ring, halving-doubling and
// two-level at P = 2 to 9 (powers of two and not) and buckets smaller than P.
// Every rank ends with the same bits, and those are the average of the
// ranks' inputs to float rounding.
#include "dist/schemes/allreduce_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <utility>

namespace poseidon::dist {
namespace {

// Runs every rank's schedule; returns each rank's buffer.
std::vector<std::vector<float>> run(AllreduceAlgorithm algorithm, const std::vector<std::vector<float>>& inputs,
                                    int per_host) {
  const int p = static_cast<int>(inputs.size());
  const int64_t n = static_cast<int64_t>(inputs[0].size());
  std::vector<std::vector<ScheduleStep>> steps;
  std::map<int, std::vector<std::pair<int, size_t>>> by_tag;  // tag -> (rank, step index)
  for (int r = 0; r < p; ++r) {
    steps.push_back(allreduce_schedule(algorithm, n, p, r, per_host));
    for (size_t i = 0; i < steps[r].size(); ++i) by_tag[steps[r][i].tag].emplace_back(r, i);
  }
  std::vector<std::vector<float>> data = inputs;
  for (const auto& [tag, at] : by_tag) {
    // Everything sent in this step, keyed by (from, to); then the receives.
    std::map<std::pair<int, int>, std::vector<float>> messages;
    for (auto [r, i] : at) {
      const ScheduleStep& s = steps[r][i];
      if (s.send_to < 0) continue;
      EXPECT_FALSE(messages.count({r, s.send_to})) << "two sends from " << r << " to " << s.send_to << " at " << tag;
      messages[{r, s.send_to}].assign(data[r].begin() + s.send_begin, data[r].begin() + s.send_begin + s.send_count);
    }
    size_t received = 0;
    for (auto [r, i] : at) {
      const ScheduleStep& s = steps[r][i];
      if (s.receive_from < 0) continue;
      auto it = messages.find({s.receive_from, r});
      if (it == messages.end()) {
        ADD_FAILURE() << "rank " << r << " waits for " << s.receive_from << " at tag " << tag << ", never sent";
        continue;
      }
      EXPECT_EQ(static_cast<int64_t>(it->second.size()), s.receive_count) << "tag " << tag;
      float* into = data[r].data() + s.receive_begin;
      for (int64_t k = 0; k < s.receive_count && k < static_cast<int64_t>(it->second.size()); ++k)
        into[k] = s.add ? (s.scale == 1.f ? into[k] + it->second[k] : (into[k] + it->second[k]) * s.scale)
                        : it->second[k];
      ++received;
    }
    EXPECT_EQ(received, messages.size()) << "a message of tag " << tag << " is never received";
  }
  return data;
}

void check(AllreduceAlgorithm algorithm, int p, int64_t n, int per_host) {
  SCOPED_TRACE(algorithm_name(algorithm) + " P=" + std::to_string(p) + " n=" + std::to_string(n) +
               " per host " + std::to_string(per_host));
  std::mt19937 rng(static_cast<unsigned>(p * 1000 + n));
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> inputs(p, std::vector<float>(n));
  std::vector<double> mean(n, 0);
  for (auto& v : inputs)
    for (int64_t k = 0; k < n; ++k) {
      v[k] = normal(rng);
      mean[k] += v[k] / p;
    }
  const auto out = run(algorithm, inputs, per_host);
  for (int r = 1; r < p; ++r)
    EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), n * sizeof(float)), 0) << "rank " << r << " differs";
  for (int64_t k = 0; k < n; ++k) EXPECT_NEAR(out[0][k], mean[k], 1e-5) << k;
}

TEST(AllreduceSchedule, EveryAlgorithmAveragesToTheSameBitsOnEveryRank) {
  for (int p = 2; p <= 9; ++p)
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{1000}}) {
      check(AllreduceAlgorithm::ring, p, n, 1);
      check(AllreduceAlgorithm::halving_doubling, p, n, 1);
      for (int per_host = 1; per_host <= p; ++per_host)
        if (p % per_host == 0) check(AllreduceAlgorithm::two_level, p, n, per_host);
    }
}

TEST(AllreduceSchedule, StepCountsFollowTheAlgorithms) {
  EXPECT_EQ(allreduce_schedule(AllreduceAlgorithm::ring, 100, 8, 3).size(), 14u);
  EXPECT_EQ(allreduce_schedule(AllreduceAlgorithm::halving_doubling, 100, 8, 3).size(), 6u);
  // P = 6: ranks 4 and 5 only hand over and get back; ranks 0 and 1 also take and return.
  EXPECT_EQ(allreduce_schedule(AllreduceAlgorithm::halving_doubling, 100, 6, 5).size(), 2u);
  EXPECT_EQ(allreduce_schedule(AllreduceAlgorithm::halving_doubling, 100, 6, 1).size(), 6u);
  EXPECT_EQ(allreduce_schedule(AllreduceAlgorithm::halving_doubling, 100, 6, 2).size(), 4u);
  // 8 ranks, 4 per host: 3 + 2 + 3.
  EXPECT_EQ(allreduce_schedule(AllreduceAlgorithm::two_level, 100, 8, 5, 4).size(), 8u);
  EXPECT_THROW(allreduce_schedule(AllreduceAlgorithm::two_level, 100, 6, 0, 4), Error);
}

}  // namespace
}  // namespace poseidon::dist
