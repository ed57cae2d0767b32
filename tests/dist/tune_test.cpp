// The options at scale end to end: spread PS blocks keep every rank serving,
// `plan --tune`'s search (dist/sim/tune.h) never ends slower than where it
// started and leaves the ring where latency dominates, and a plan file keeps
// the tuned options across a write and a read.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include <unistd.h>

#include "dist/plan/plan_file.h"
#include "dist/sim/tune.h"

namespace poseidon::testing {

namespace {
Net lenet(int64_t batch) { return Net(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"), batch); }
}  // namespace

TEST(Scale, SpreadBlocksGiveEveryRankAShare) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.block_bytes = 4 << 20;  // lenet's 431,080 parameters: at most 8 blocks, one per parameter
  auto params = dist::backward_order(net);
  const dist::CommPlan fixed = dist::make_comm_plan(net, params, config, 16);
  config.collective.spread_blocks = true;
  const dist::CommPlan spread = dist::make_comm_plan(net, params, config, 16);
  auto owners = [](const dist::CommPlan& plan) {
    std::set<int> out;
    for (const auto& u : plan.groups)
      for (const auto& b : u.blocks) out.insert(b.owner);
    return out.size();
  };
  EXPECT_LE(owners(fixed), 8u);
  EXPECT_EQ(owners(spread), 16u);
}

TEST(Scale, TuneIsNeverSlowerThanTheConfigAndLeavesTheRingAtLargeP) {
  Net net = lenet(1);
  const dist::ComputeProfile profile = dist::flops_profile(net, 64, 5);
  dist::SimConfig start;
  start.workers = 256;
  start.iterations = 4;
  start.dist.scheme = dist::SchemeChoice::allreduce;
  start.link.bandwidth_gbps = 25;
  start.link.latency_us = 50;
  const dist::TuneResult best = dist::tune(net, profile, start);
  EXPECT_LE(best.result.iteration_s, best.trials.front().result.iteration_s);
  EXPECT_NE(best.config.collective.allreduce, dist::AllreduceAlgorithm::ring)
      << "510 latencies of 50 us per ring against 16 for halving-doubling";
}

TEST(Scale, PlanFileKeepsTunedOptions) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.order = dist::SendOrder::priority;
  config.bucket_bytes = 1 << 20;
  config.collective.allreduce = dist::AllreduceAlgorithm::halving_doubling;
  config.collective.spread_blocks = true;
  config.collective.ranks_per_host = 4;
  dist::PlanRecord record = dist::plan_record(dist::plan_for_config(net, config, 8), net, dist::LinkModel{});
  record.tuned = dist::TunedOptions::of(config);
  const std::string path = std::filesystem::temp_directory_path() / ("poseidon_tuned_plan_" + std::to_string(getpid()) + ".json");
  dist::write_plan_file(path, record);
  const dist::PlanRecord read = dist::read_plan_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(read.tuned);
  dist::DistConfig applied;
  dist::apply_tuned(*read.tuned, applied);
  EXPECT_EQ(applied.order, dist::SendOrder::priority);
  EXPECT_EQ(applied.bucket_bytes, 1 << 20);
  EXPECT_EQ(applied.collective.allreduce, dist::AllreduceAlgorithm::halving_doubling);
  EXPECT_TRUE(applied.collective.spread_blocks);
  EXPECT_FALSE(applied.collective.fusion_auto);
  EXPECT_EQ(applied.collective.ranks_per_host, 4);
}

}  // namespace poseidon::testing
