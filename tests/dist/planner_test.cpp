// dist/planner: the link probe gives every rank the same figures (plans must
// agree), and figures set in the config are taken as they are.
#include "dist/plan/planner.h"
#include "dist/runtime/link_probe.h"

#include <gtest/gtest.h>

#include "tests/dist/test_world.h"

namespace poseidon::testing {

namespace {
// Every rank's (bandwidth, latency, GEMM rate), gathered on every rank.
std::vector<double> gather_figures(const dist::LinkModel& link) {
  dist::Comm comm(test_world());
  const double mine[3] = {link.bandwidth_gbps, link.latency_us, link.gemm_gflops};
  std::vector<double> all(3 * comm.size());
  POSEIDON_MPI(MPI_Allgather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, comm.handle()));
  return all;
}
}  // namespace

TEST(Planner, MeasuredLinkIsTheSameOnEveryRank) {
  const dist::LinkModel link = dist::measure_link(test_world(), dist::DistConfig{});
  const std::vector<double> all = gather_figures(link);
  for (size_t r = 1; r < all.size() / 3; ++r)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(all[3 * r + i], all[i]) << "rank " << r << " figure " << i;
  EXPECT_GT(link.bandwidth_gbps, 0);
  EXPECT_GE(link.latency_us, 0);
  EXPECT_GT(link.gemm_gflops, 0);
}

TEST(Planner, ConfiguredLinkIsTakenAsItIs) {
  dist::DistConfig config;
  config.bandwidth_gbps = 2.5;
  config.latency_us = 7;
  const dist::LinkModel link = dist::measure_link(test_world(), config);
  EXPECT_EQ(link.bandwidth_gbps, 2.5);
  EXPECT_EQ(link.latency_us, 7);
}

TEST(Planner, CostsFollowThePaperFormulas) {
  dist::LinkModel link;
  link.bandwidth_gbps = 8;  // 1e9 bytes/s
  link.latency_us = 0;
  link.gemm_gflops = 1;
  // PS: 2 S (P1 + P2 - 2) / P2 numbers with P1 = P2 = 4.
  EXPECT_EQ(dist::ps_cost(1000, 4, link).numbers, 2.0 * 1000 * 6 / 4);
  EXPECT_DOUBLE_EQ(dist::ps_cost(1000, 4, link).seconds, 3000.0 / 2 * 4 / 1e9);
  // SFB: 2 K (P - 1) (M + N) numbers, plus 2 M N P K flops to rebuild.
  const dist::SchemeCost sfb = dist::sfb_cost(30, 20, 5, 4, link);
  EXPECT_EQ(sfb.numbers, 2.0 * 5 * 3 * 50);
  EXPECT_DOUBLE_EQ(sfb.seconds, 1500.0 / 2 * 4 / 1e9 + 2.0 * 30 * 20 * 4 * 5 / 1e9);
  EXPECT_EQ(dist::ps_cost(1000, 1, link).numbers, 0);
}

}  // namespace poseidon::testing
