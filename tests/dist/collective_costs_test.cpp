// The all-reduce cost model (dist/plan/collective_costs.h): the steps of each algorithm
// against their closed forms, the automatic choice, fused bucket and spread
// block sizes, and the planner's choice at large P with those options.
#include "dist/plan/collective_costs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace poseidon::dist {
namespace {

LinkModel link_of(double gbps, double latency_us) {
  LinkModel link;
  link.bandwidth_gbps = gbps;
  link.latency_us = latency_us;
  return link;
}

TEST(Collective, RingStepsMatchThePlannersRingCost) {
  const LinkModel link = link_of(10, 20);
  for (int p : {2, 3, 8, 100}) {
    const auto steps = allreduce_steps(AllreduceAlgorithm::ring, 1e6, p, link, {});
    EXPECT_EQ(steps.size(), static_cast<size_t>(2 * (p - 1)));
    const SchemeCost ring = allreduce_cost(1000000, p, link);
    EXPECT_NEAR(steps_floats(steps), ring.numbers, 1e-6 * ring.numbers);
    EXPECT_NEAR(steps_seconds(steps, link, {}), ring.seconds, 1e-9 * ring.seconds);
  }
}

TEST(Collective, HalvingDoublingMovesTheRingsBytesInLogSteps) {
  const LinkModel link = link_of(10, 20);
  for (int p : {2, 8, 512}) {
    const auto hd = allreduce_steps(AllreduceAlgorithm::halving_doubling, 1 << 20, p, link, {});
    EXPECT_EQ(hd.size(), static_cast<size_t>(2 * std::log2(p)));
    EXPECT_NEAR(steps_floats(hd), steps_floats(allreduce_steps(AllreduceAlgorithm::ring, 1 << 20, p, link, {})), 1e-6);
  }
  // Not a power of two: the extra ranks' hand-over and return, a whole bucket each.
  const auto six = allreduce_steps(AllreduceAlgorithm::halving_doubling, 1000, 6, link, {});
  ASSERT_EQ(six.size(), 2u + 4u);
  EXPECT_EQ(six.front().floats, 1000);
  EXPECT_EQ(six.front().summed, 1000);
  EXPECT_EQ(six.back().floats, 1000);
  EXPECT_EQ(six.back().summed, 0);
}

TEST(Collective, AutomaticTakesHalvingDoublingWhereLatencyDominates) {
  CollectiveOptions automatic;
  automatic.allreduce = AllreduceAlgorithm::automatic;
  // 512 ranks, 20 us: the ring's 1022 latencies (20 ms) against 18.
  EXPECT_EQ(choose_algorithm(1 << 20, 512, link_of(25, 20), automatic), AllreduceAlgorithm::halving_doubling);
  // Two ranks: the same two steps either way, and the ring on ties.
  EXPECT_EQ(choose_algorithm(1 << 20, 2, link_of(25, 20), automatic), AllreduceAlgorithm::ring);
  // Six ranks, no latency, a large bucket: the extras' whole-bucket steps cost more than the ring saves.
  EXPECT_EQ(choose_algorithm(1 << 24, 6, link_of(25, 0), automatic), AllreduceAlgorithm::ring);
}

TEST(Collective, TwoLevelKeepsTheFirstAndLastStepsInsideTheHost) {
  CollectiveOptions hosts;
  hosts.ranks_per_host = 4;
  const auto steps = allreduce_steps(AllreduceAlgorithm::two_level, 1 << 20, 64, link_of(25, 20), hosts);
  // 3 steps inside, 2 log2(16) between the 16 hosts (each with all 4 ranks on the link), 3 inside.
  ASSERT_EQ(steps.size(), 3u + 8u + 3u);
  for (size_t i = 0; i < steps.size(); ++i) EXPECT_EQ(steps[i].sharing, i < 3 || i >= 11 ? 0 : 4) << i;
  // The host's link carries the bucket's 2 (H - 1) / H each way, as one rank per host would.
  EXPECT_NEAR(steps_link_busy(steps, link_of(25, 20)), 2.0 * 15 / 16 * (1 << 20) * 32 / 25e9, 1e-12);
}

TEST(Collective, FusedBucketsGrowWithLatencyAndStayInBounds) {
  CollectiveOptions o;
  o.allreduce = AllreduceAlgorithm::automatic;
  EXPECT_EQ(bucket_bytes_for(4 << 20, 512, link_of(25, 20), o), 4 << 20) << "fixed unless fusion is auto";
  o.fusion_auto = true;
  const int64_t fast = bucket_bytes_for(4 << 20, 512, link_of(25, 2), o);
  const int64_t slow = bucket_bytes_for(4 << 20, 512, link_of(25, 50), o);
  EXPECT_LT(fast, slow);
  EXPECT_GE(fast, 1 << 20);
  EXPECT_LE(slow, 64 << 20);
  EXPECT_EQ(slow % 4, 0);
  // At the chosen size (away from the bounds) the latencies are a tenth of a bucket's time.
  const int64_t mid = bucket_bytes_for(4 << 20, 512, link_of(25, 20), o);
  ASSERT_GT(mid, 1 << 20);
  ASSERT_LT(mid, 64 << 20);
  const auto algorithm = choose_algorithm(mid / 4.0, 512, link_of(25, 20), o);
  const double total = steps_seconds(allreduce_steps(algorithm, mid / 4.0, 512, link_of(25, 20), o), link_of(25, 20), o);
  const double latencies = steps_seconds(allreduce_steps(algorithm, 0, 512, link_of(25, 20), o), link_of(25, 20), o);
  EXPECT_NEAR(latencies / total, 0.1, 0.01);
}

TEST(Collective, SpreadBlocksGiveEveryRankOne) {
  CollectiveOptions o;
  EXPECT_EQ(block_bytes_for(4 << 20, 100 << 20, 512, o), 4 << 20);
  o.spread_blocks = true;
  const int64_t block = block_bytes_for(4 << 20, 100 << 20, 512, o);
  EXPECT_GE((100 << 20) / block, 512);
  EXPECT_EQ(block_bytes_for(4 << 20, 100 << 20, 4, o), 4 << 20) << "no larger than the fixed size";
  EXPECT_EQ(block_bytes_for(4 << 20, 1 << 20, 1024, o), 16 << 10) << "no smaller than 16 KiB";
}

TEST(Collective, PsIncastAndFusedShareMoveSmallLayersToAllreduceAtScale) {
  const LinkModel link = link_of(25, 20);
  CollectiveOptions o;
  o.allreduce = AllreduceAlgorithm::automatic;
  o.fusion_auto = true;
  // A 64 KiB layer on 512 ranks: one block, whose owner takes 511 pushes.
  const SchemeCost ps = ps_cost(16384, 512, link, 512, 16384);
  const SchemeCost ar = allreduce_cost(16384, 512, link, o, bucket_bytes_for(4 << 20, 512, link, o));
  EXPECT_LT(ar.seconds, ps.seconds);
  EXPECT_NEAR(ar.numbers, ps.numbers, 1e-6 * ps.numbers) << "the same bytes either way";
  // Without the incast term (fixed blocks) and with a lone layer's latencies PS stays ahead, as before.
  EXPECT_LT(ps_cost(16384, 512, link, 512, 0).seconds, allreduce_cost(16384, 512, link, {}, 4 << 20).seconds);
}

}  // namespace
}  // namespace poseidon::dist
