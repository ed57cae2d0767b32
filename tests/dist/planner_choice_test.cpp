// What the planner chooses by itself: the collective options when the
// config sets none (chosen_options, dist/plan/collective_costs.h), and the
// gradients' formats and low-rank ranks under dist.compression
// (dist/plan/compression_plan.h), with low-rank summed by the plan's
// all-reduce algorithm in the plan and in the simulator.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/config_node.h"
#include "dist/plan/collective_costs.h"
#include "dist/plan/compression_plan.h"
#include "dist/sim/simulate.h"
#include "tests/dist/compression_fixture.h"

namespace poseidon::testing {
namespace {

dist::DistConfig parse(const std::string& yaml) {
  return dist::DistConfig::parse(ConfigNode::parse(yaml.empty() ? "{}" : yaml, "dist.yaml"));
}

TEST(PlannerChoice, NoCollectiveKeysChooseFromTheRankCount) {
  const dist::DistConfig none = parse("ranks_per_host: 8\n");  // a cluster key only
  EXPECT_TRUE(none.collective.planner_chooses);
  const dist::CollectiveOptions small = dist::chosen_options(none.collective, dist::kSmallCluster);
  EXPECT_EQ(small.allreduce, dist::AllreduceAlgorithm::ring);
  EXPECT_FALSE(small.fusion_auto);
  EXPECT_FALSE(small.spread_blocks);
  const dist::CollectiveOptions large = dist::chosen_options(none.collective, dist::kSmallCluster + 1);
  EXPECT_EQ(large.allreduce, dist::AllreduceAlgorithm::automatic);
  EXPECT_TRUE(large.fusion_auto);
  EXPECT_TRUE(large.spread_blocks);
  EXPECT_EQ(large.ranks_per_host, 8);
  // Any of the three keys set: the config's options as they are, at any P.
  for (const char* key : {"allreduce: ring\n", "fusion: fixed\n", "spread_blocks: false\n"}) {
    const dist::DistConfig set = parse(key);
    EXPECT_FALSE(set.collective.planner_chooses) << key;
    EXPECT_EQ(dist::chosen_options(set.collective, 1024).allreduce, dist::AllreduceAlgorithm::ring) << key;
    EXPECT_FALSE(dist::chosen_options(set.collective, 1024).spread_blocks) << key;
  }
}

// A config with no dist key simulates as the large-cluster options at 256
// ranks, faster than the small-cluster ones there, and as before at 8.
TEST(PlannerChoice, DefaultsSimulateAsTheChosenOptions) {
  Net net(lenet_config(), 1);
  const dist::ComputeProfile profile = dist::flops_profile(net, 64, 5);
  auto iteration = [&](const dist::DistConfig& d, int workers) {
    dist::SimConfig c;
    c.workers = workers;
    c.iterations = 4;
    c.link = dist::LinkModel{25, 20, 50};
    c.dist = d;
    return dist::simulate(net, profile, c).iteration_s;
  };
  const dist::DistConfig defaults = parse("");
  const dist::DistConfig small = parse("allreduce: ring\nfusion: fixed\nspread_blocks: false\n");
  const dist::DistConfig large = parse("allreduce: auto\nfusion: auto\nspread_blocks: true\n");
  EXPECT_EQ(iteration(defaults, 256), iteration(large, 256));
  EXPECT_LT(iteration(defaults, 256), iteration(small, 256));
  EXPECT_EQ(iteration(defaults, 8), iteration(small, 8));
}

TEST(CompressionPolicy, ParsesAndRefusesWhatCannotHold) {
  EXPECT_EQ(parse("").compression, dist::Compression::off);
  const dist::DistConfig automatic = parse("compression: auto\ncompression_min_rank: 8\n");
  EXPECT_EQ(automatic.compression, dist::Compression::automatic);
  EXPECT_EQ(automatic.compression_min_rank, 8);
  EXPECT_EQ(parse("compression: lossless\n").compression, dist::Compression::lossless);
  EXPECT_THROW(parse("compression: fast\n"), Error);
  EXPECT_THROW(parse("compression: auto\nwire: bf16\n"), Error);     // auto chooses the wire
  EXPECT_THROW(parse("compression: lossless\nlowrank: true\n"), Error);
  EXPECT_THROW(parse("compression: lossless\nwire: bf16\n"), Error);
  EXPECT_THROW(parse("compression_min_rank: 8\n"), Error);           // a budget of auto only
  EXPECT_THROW(parse("compression: auto\ncompression_min_rank: 0\n"), Error);
  EXPECT_THROW(parse("compression: auto\nscheme: ps\n"), Error);     // a per-layer choice
}

struct LayerChoice {
  dist::Scheme scheme;
  dist::Wire wire;
  int rank;
};

std::map<std::string, LayerChoice> choices(Net& net, const dist::DistConfig& config, int ranks,
                                           const dist::LinkModel& link) {
  std::map<std::string, LayerChoice> out;
  const dist::CommPlan plan = dist::plan_for_config(net, config, ranks, link);
  for (const dist::PlannedParam& p : plan.params) out[net.layer(p.layer).name()] = {p.scheme, p.wire, p.rank};
  return out;
}

TEST(CompressionPolicy, AutoChoosesWireAndRankPerLayerWithinTheBudget) {
  Net net(lenet_config(), 64);
  const dist::LinkModel slow{0.1, 20, 50};  // bytes dominate
  const dist::DistConfig default_budget = parse("compression: auto\n");
  const auto automatic = choices(net, default_budget, 4, slow);
  EXPECT_EQ(automatic.at("fc1").scheme, dist::Scheme::lowrank);  // 400,000 numbers
  for (const auto& [layer, c] : automatic)
    if (c.scheme == dist::Scheme::lowrank) {
      const auto weighed = dist::lowrank_candidates(default_budget.compression_min_rank);
      EXPECT_NE(std::find(weighed.begin(), weighed.end(), c.rank), weighed.end()) << layer << " rank " << c.rank;
    }
  // A budget of rank 16: fc2 (10 outputs) cannot be compressed that far and
  // goes bf16 instead; no layer below rank 16.
  const auto budget = choices(net, parse("compression: auto\ncompression_min_rank: 16\n"), 4, slow);
  EXPECT_NE(budget.at("fc2").scheme, dist::Scheme::lowrank);
  EXPECT_EQ(budget.at("fc2").wire, dist::Wire::bf16);
  int compressed = 0;
  for (const auto& [layer, c] : budget)
    if (c.scheme == dist::Scheme::lowrank) {
      ++compressed;
      EXPECT_GE(c.rank, 16) << layer;
    }
  EXPECT_GT(compressed, 0);
  // Lossless: fp32 everywhere, no low-rank, on the same slow link.
  for (const auto& [layer, c] : choices(net, parse("compression: lossless\n"), 4, slow)) {
    EXPECT_NE(c.scheme, dist::Scheme::lowrank) << layer;
    EXPECT_EQ(c.wire, dist::Wire::fp32) << layer;
  }
  // The plan names its policy and ranks (the training log's dist: line).
  const std::string groups = dist::describe_groups(dist::plan_for_config(net, parse("compression: auto\n"), 4, slow));
  EXPECT_NE(groups.find("compression auto"), std::string::npos) << groups;
  EXPECT_NE(groups.find("low-rank rank "), std::string::npos) << groups;
}

// Low-rank factors are summed by the plan's algorithm: at 512 ranks,
// halving-doubling's 2 log2 P steps instead of a ring's 2 (P - 1), in the
// plan, the planner's cost and the simulated iteration.
TEST(CompressionPolicy, LowRankSumsByThePlansAlgorithm) {
  Net net(lenet_config(), 1);
  const dist::ComputeProfile profile = dist::flops_profile(net, 64, 5);
  dist::SimConfig c;
  c.workers = 512;
  c.iterations = 4;
  c.link = dist::LinkModel{10, 20, 50};
  c.dist = parse("lowrank: true\nlowrank_rank: 2\nallreduce: halving_doubling\n");
  const dist::CommPlan plan = dist::simulation_plan(net, c.dist, c.workers, c.link, profile.batch);
  int lowrank_groups = 0;
  for (const dist::SyncGroup& g : plan.groups)
    if (g.scheme == dist::Scheme::lowrank) {
      ++lowrank_groups;
      EXPECT_EQ(g.algorithm, dist::AllreduceAlgorithm::halving_doubling) << g.label;
      EXPECT_EQ(g.rank, 2) << g.label;
    }
  ASSERT_GT(lowrank_groups, 0);
  dist::CollectiveOptions hd;
  hd.allreduce = dist::AllreduceAlgorithm::halving_doubling;
  EXPECT_LT(dist::lowrank_cost(500, 800, 500, 2, 512, c.link, hd).seconds,
            dist::lowrank_cost(500, 800, 500, 2, 512, c.link).seconds);
  const double by_halving = dist::simulate(net, profile, c).iteration_s;
  c.dist.collective.allreduce = dist::AllreduceAlgorithm::ring;
  const double by_ring = dist::simulate(net, profile, c).iteration_s;
  EXPECT_LT(by_halving, by_ring);
}

// Hosts of 8 ranks sharing one link: a PS layer's pushes and pulls to other
// hosts cross it 8 at a time, the rest stays inside at the host's rate.
TEST(PlannerChoice, RanksOfAHostShareItsLinkForPs) {
  const dist::LinkModel link{25, 0, 50};
  dist::CollectiveOptions hosts;
  hosts.ranks_per_host = 8;
  hosts.host_bandwidth_gbps = 3600;
  const dist::SchemeCost alone = dist::ps_cost(1 << 20, 512, link, 512, 0);
  const dist::SchemeCost shared = dist::ps_cost(1 << 20, 512, link, 512, 0, dist::Wire::fp32, hosts);
  EXPECT_EQ(shared.numbers, alone.numbers);
  EXPECT_NEAR(shared.seconds / alone.seconds, 8.0 * 504 / 511 + 7.0 / 511 * 25 / 3600, 1e-9);
  EXPECT_EQ(dist::host_link_factor(512, link, {}), 1);
}

}  // namespace
}  // namespace poseidon::testing
