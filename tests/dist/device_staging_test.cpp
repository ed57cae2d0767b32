// dist/plan/device_staging.h: which layers of a GPU net's plan are staged to
// the host (those whose scheme computes there, or all of them without a
// device transport), and the bf16 buckets' slices of the device buffer NCCL
// sums (aligned, disjoint, the buffer large enough).
#include "dist/plan/device_staging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"

namespace poseidon::testing {

namespace {
// A plan of `schemes.size()` layers, layer i holding one group of schemes[i];
// `empty` layers hold none.
dist::CommPlan one_group_per_layer(const std::vector<dist::Scheme>& schemes, const std::vector<size_t>& empty) {
  dist::CommPlan plan;
  plan.layer_groups.resize(schemes.size() + empty.size());
  size_t layer = 0;
  for (dist::Scheme s : schemes) {
    while (std::find(empty.begin(), empty.end(), layer) != empty.end()) ++layer;
    dist::SyncGroup g;
    g.scheme = s;
    plan.layer_groups[layer++].push_back(plan.groups.size());
    plan.groups.push_back(g);
  }
  return plan;
}

size_t layer_named(Net& net, const std::string& name) {
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (net.layer(i).name() == name) return i;
  ADD_FAILURE() << "no layer " << name;
  return 0;
}
}  // namespace

TEST(DeviceStaging, OnlyHostSchemesAreStagedWhereRanksHaveADeviceTransport) {
  using dist::Scheme;
  // Layers 1 and 4 hold no parameters.
  const dist::CommPlan plan =
      one_group_per_layer({Scheme::allreduce, Scheme::ps, Scheme::sfb, Scheme::lowrank, Scheme::allreduce}, {1, 4});
  EXPECT_EQ(dist::layers_needing_host(plan, true), (std::vector<bool>{false, false, true, true, false, true, false}));
  EXPECT_TRUE(dist::any_layer_needs_host(plan, true));
  const dist::CommPlan all_reduce = one_group_per_layer({Scheme::allreduce, Scheme::allreduce}, {0});
  EXPECT_EQ(dist::layers_needing_host(all_reduce, true), (std::vector<bool>{false, false, false}));
  EXPECT_FALSE(dist::any_layer_needs_host(all_reduce, true));
}

TEST(DeviceStaging, WithoutADeviceTransportEveryLayerWithParametersGoesThroughTheHost) {
  using dist::Scheme;
  const dist::CommPlan plan = one_group_per_layer({Scheme::allreduce, Scheme::allreduce, Scheme::ps}, {2});
  EXPECT_EQ(dist::layers_needing_host(plan, false), (std::vector<bool>{true, true, false, true}));
  EXPECT_TRUE(dist::any_layer_needs_host(plan, false));
}

// A layer whose parameters sit in a bucket with another layer's is decided by
// its own groups: LeNet with fc1 on the parameter server, the rest all-reduced
// in buckets that span several layers.
TEST(DeviceStaging, APlannedNetStagesTheLayersOfItsHostSchemesOnly) {
  Net net(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"), 2);
  auto params = dist::backward_order(net);
  const size_t fc1 = layer_named(net, "fc1");
  for (auto& p : params) p.scheme = p.layer == fc1 ? dist::Scheme::ps : dist::Scheme::allreduce;
  dist::DistConfig config;
  const dist::CommPlan plan = dist::make_comm_plan(net, std::move(params), config, 2);
  const std::vector<bool> needs = dist::layers_needing_host(plan, true);
  ASSERT_EQ(needs.size(), net.num_layers());
  for (size_t i = 0; i < net.num_layers(); ++i) EXPECT_EQ(needs[i], i == fc1) << net.layer(i).name();
}

// The layers left unstaged exchange the device net's parameters (here a
// second net of the same model), the staged keep the mirror's.
TEST(DeviceStaging, UnstagedLayersExchangeTheDeviceNetsParameters) {
  const ConfigNode model = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  Net mirror(model, 2), device(model, 2);
  auto params = dist::backward_order(mirror);
  const size_t fc1 = layer_named(mirror, "fc1");
  for (auto& p : params) p.scheme = p.layer == fc1 ? dist::Scheme::ps : dist::Scheme::allreduce;
  dist::CommPlan plan = dist::make_comm_plan(mirror, std::move(params), dist::DistConfig{}, 2);
  const std::vector<bool> staged = dist::layers_needing_host(plan, true);
  dist::exchange_unstaged_on_device(plan, staged, device);
  for (const dist::PlannedParam& p : plan.params) {
    Net& home = p.layer == fc1 ? mirror : device;
    EXPECT_EQ(p.param, home.find_param(p.param->name)) << p.param->name;
    EXPECT_EQ(p.param->grad.data(), home.flat_grads().data() + p.offset) << p.param->name;
  }
  EXPECT_THROW(dist::exchange_unstaged_on_device(plan, std::vector<bool>(3, false), device), InternalError);
}

TEST(DeviceStaging, WireSlicesAreAlignedAndApart) {
  dist::DeviceWireSlices slices;
  EXPECT_EQ(slices.reserve(100), 0);
  EXPECT_EQ(slices.total(), 128);
  EXPECT_EQ(slices.reserve(300), 128);
  EXPECT_EQ(slices.total(), 512);
  EXPECT_EQ(slices.reserve(128), 512);
  EXPECT_EQ(slices.total(), 640);
  EXPECT_EQ(slices.bytes(), 1280);
  EXPECT_THROW(slices.reserve(0), InternalError);
}

TEST(DeviceStaging, ManyWireSlicesFitTheirBufferWithoutOverlap) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> count(1, 5000);
  dist::DeviceWireSlices slices;
  int64_t end = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t n = count(rng);
    const int64_t begin = slices.reserve(n);
    ASSERT_EQ(begin * static_cast<int64_t>(sizeof(uint16_t)) % dist::DeviceWireSlices::kAlignBytes, 0) << i;
    ASSERT_GE(begin, end) << "slice " << i << " overlaps the one before";
    end = begin + n;
    ASSERT_GE(slices.total(), end) << i;
    ASSERT_LT(slices.total() - end, dist::DeviceWireSlices::kAlignElements) << i;
  }
}

}  // namespace poseidon::testing
