// dist/plan: sync groups cover every learnable parameter once, buckets respect
// their size limit, PS blocks tile their parameter and are balanced by bytes;
// the one-line summary of a plan counts layers per scheme.
#include "dist/plan/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace poseidon::testing {

namespace {
Net lenet(int64_t batch) { return Net(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"), batch); }

dist::CommPlan plan_all(Net& net, dist::Scheme scheme, const dist::DistConfig& config, int ranks) {
  auto params = dist::backward_order(net);
  for (auto& p : params) p.scheme = scheme;
  return dist::make_comm_plan(net, std::move(params), config, ranks);
}
}  // namespace

TEST(Plan, BackwardOrderIsLastLayerFirst) {
  Net net = lenet(2);
  auto params = dist::backward_order(net);
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.param->name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc2.weight", "fc2.bias", "fc1.weight", "fc1.bias", "conv2.weight",
                                             "conv2.bias", "conv1.weight", "conv1.bias"}));
  for (const auto& p : params) EXPECT_EQ(net.flat_grads().data() + p.offset, p.param->grad.data());
}

TEST(Plan, AllreduceBucketsAreContiguousAndBounded) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.bucket_bytes = 64 << 10;
  dist::CommPlan plan = plan_all(net, dist::Scheme::allreduce, config, 3);
  std::vector<int> seen(plan.params.size(), 0);
  size_t next = 0;
  for (const auto& u : plan.groups) {
    ASSERT_EQ(u.scheme, dist::Scheme::allreduce);
    int64_t covered = 0;
    for (size_t i : u.params) {
      EXPECT_EQ(i, next++) << "buckets follow backward order";
      ++seen[i];
      const auto& p = plan.params[i];
      EXPECT_GE(p.offset, u.begin);
      EXPECT_LE(p.offset + p.param->value.numel(), u.end);
      covered += p.param->value.numel();
    }
    EXPECT_LE(u.end - u.begin - covered, 16 * static_cast<int64_t>(u.params.size())) << "only alignment padding";
    if (u.params.size() > 1) {
      EXPECT_LE((u.end - u.begin) * 4, config.bucket_bytes) << u.label;
    }
  }
  for (int s : seen) EXPECT_EQ(s, 1);
  // Small tensors fuse: lenet's eight parameters need fewer buckets than parameters.
  EXPECT_LT(plan.groups.size(), plan.params.size());
  EXPECT_GT(plan.groups.size(), 1u);
}

TEST(Plan, PsBlocksTileParametersAndBalanceOwners) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.block_bytes = 64 << 10;
  const int ranks = 3;
  dist::CommPlan plan = plan_all(net, dist::Scheme::ps, config, ranks);
  ASSERT_EQ(plan.groups.size(), plan.params.size());
  std::vector<int64_t> served(ranks, 0);
  std::set<int> ids;
  for (const auto& u : plan.groups) {
    ASSERT_EQ(u.params.size(), 1u);
    int64_t at = 0;
    for (const auto& b : u.blocks) {
      EXPECT_EQ(b.begin, at);
      EXPECT_GT(b.count, 0);
      EXPECT_LE(b.count * 4, config.block_bytes);
      at += b.count;
      ASSERT_GE(b.owner, 0);
      ASSERT_LT(b.owner, ranks);
      served[b.owner] += b.count * 4;
      EXPECT_TRUE(ids.insert(b.id).second) << "block id " << b.id << " twice";
    }
    EXPECT_EQ(at, plan.params[u.params[0]].param->value.numel()) << u.label;
  }
  EXPECT_EQ(*ids.rbegin() + 1, static_cast<int>(ids.size()));
  const auto [lo, hi] = std::minmax_element(served.begin(), served.end());
  EXPECT_LE(*hi - *lo, config.block_bytes) << "owners balanced by bytes to within one block";
  EXPECT_GT(*lo, 0);
}

TEST(Plan, LayerUnitsNameEveryUnitOfTheLayer) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.bucket_bytes = 64 << 10;
  dist::CommPlan plan = plan_all(net, dist::Scheme::allreduce, config, 2);
  for (size_t l = 0; l < net.num_layers(); ++l) {
    std::set<size_t> expect;
    for (size_t u = 0; u < plan.groups.size(); ++u)
      for (size_t i : plan.groups[u].params)
        if (plan.params[i].layer == l) expect.insert(u);
    EXPECT_EQ(std::set<size_t>(plan.layer_groups[l].begin(), plan.layer_groups[l].end()), expect) << net.layer(l).name();
  }
}

TEST(Plan, SfbTakesFcLayersWholeAndPsTheRest) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.scheme = dist::SchemeChoice::sfb;
  dist::CommPlan plan = dist::plan_for_config(net, config, 2);
  std::vector<std::string> sfb_groups;
  for (const auto& u : plan.groups) {
    if (u.scheme == dist::Scheme::sfb) {
      sfb_groups.push_back(u.label);
      ASSERT_EQ(u.params.size(), 2u) << "an FC layer's weight and bias travel together";
      EXPECT_EQ(plan.params[u.params[0]].param->shape.size(), 2u);
    } else {
      EXPECT_EQ(u.scheme, dist::Scheme::ps) << u.label;
      EXPECT_EQ(u.label.rfind("conv", 0), 0u) << u.label;
    }
  }
  EXPECT_EQ(sfb_groups, (std::vector<std::string>{"fc2.weight, fc2.bias", "fc1.weight, fc1.bias"}));
  for (size_t l = 0; l < net.num_layers(); ++l)
    EXPECT_EQ(dist::sfb_applicable(net, l), net.layer(l).type() == "fc") << net.layer(l).name();
}

// The training log's dist: line: layers counted per scheme, named only
// while the names are short; Inception-V3's 95 PS layers are a count.
TEST(Plan, CountSchemesFitsALine) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.scheme = dist::SchemeChoice::sfb;
  EXPECT_EQ(dist::count_schemes(dist::plan_for_config(net, config, 2), net),
            "sfb 2 layers (fc1, fc2), ps 2 layers (conv1, conv2)");
  Net inception(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/inception_v3.yaml"), 1);
  config.scheme = dist::SchemeChoice::ps;
  const std::string line = dist::count_schemes(dist::plan_for_config(inception, config, 2), inception);
  EXPECT_EQ(line.rfind("ps ", 0), 0u) << line;
  EXPECT_EQ(line.find('('), std::string::npos) << line;
  EXPECT_LT(line.size(), 20u) << line;
}

// The dist: line's groups: what fusion, the algorithm and the wire format
// made of the plan. LeNet on all-reduce with halving-doubling and the
// default 4 MiB buckets is one bucket of its 431k parameters; on PS at the
// default 4 MiB blocks every parameter is one block (8), each on bf16.
TEST(Plan, DescribeUnitsNamesBucketsAlgorithmsAndWire) {
  Net net = lenet(2);
  dist::DistConfig config;
  config.scheme = dist::SchemeChoice::allreduce;
  config.collective.allreduce = dist::AllreduceAlgorithm::halving_doubling;
  EXPECT_EQ(dist::describe_groups(dist::plan_for_config(net, config, 4)), "1 all-reduce bucket (halving_doubling 1)");
  config.scheme = dist::SchemeChoice::ps;
  config.wire = dist::Wire::bf16;
  EXPECT_EQ(dist::describe_groups(dist::plan_for_config(net, config, 4)), "8 PS blocks, bf16 wire 8 groups");
}

}  // namespace poseidon::testing
