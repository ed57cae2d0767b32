// The scheduler simulation (dist/sim/simulate.h) against what can be worked out
// by hand: one and two FC layers on two ranks, where every transfer's start
// and end follow from bytes / bandwidth + latency; infinite bandwidth, where
// only compute is left; the planner's bytes per rank; and WFBP never slower.
#include "dist/sim/simulate.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "core/error.h"
#include "core/net.h"
#include "dist/sim/device_costs.h"
#include "tools/cli_runner.h"

namespace poseidon::dist {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

ConfigNode parse(const std::string& yaml) { return ConfigNode::parse(yaml, "model.yaml"); }

// fc1 100 -> 250 (100,000 bytes of weights), fc2 250 -> 125 (125,000 bytes), no biases.
const char* kTwoFc = R"(name: two_fc
inputs: {data: [100], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 250, bias: false}
  - {name: fc2, type: fc, inputs: fc1, num_output: 125, bias: false}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

const char* kOneFc = R"(name: one_fc
inputs: {data: [100], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 250, bias: false}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

const char* kSmall = R"(name: small
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 8, kernel_size: 3, pad: 1}
  - {name: relu1, type: relu, inputs: conv1}
  - {name: conv2, type: conv, inputs: relu1, num_output: 8, kernel_size: 3, pad: 1}
  - {name: relu2, type: relu, inputs: conv2}
  - {name: fc1, type: fc, inputs: relu2, num_output: 64}
  - {name: relu3, type: relu, inputs: fc1}
  - {name: fc2, type: fc, inputs: relu3, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

// Forward and backward milliseconds of the named layers; the rest take no time.
ComputeProfile profile_of(const Net& net, const std::map<std::string, std::pair<double, double>>& ms, int64_t batch) {
  ComputeProfile p;
  p.batch = batch;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    auto it = ms.find(net.layer(i).name());
    p.forward_s.push_back(it == ms.end() ? 0 : it->second.first / 1e3);
    p.backward_s.push_back(it == ms.end() ? 0 : it->second.second / 1e3);
  }
  return p;
}

SimConfig config_of(int workers, const std::string& scheme, bool wfbp, double gbps, double latency_us,
                    double gflops = 1) {
  SimConfig c;
  c.workers = workers;
  c.dist.scheme = parse_scheme_choice(scheme);
  c.dist.wfbp = wfbp;
  c.link.bandwidth_gbps = gbps;
  c.link.latency_us = latency_us;
  c.link.gemm_gflops = gflops;
  return c;
}

TEST(Simulate, WithoutWfbpOneLayerIsComputePlusCommunication) {
  Net net(parse(kOneFc), 1);
  const ComputeProfile profile = profile_of(net, {{"fc1", {3, 5}}}, 4);
  // 1 Gbit/s: 100,000 bytes take 0.8 ms; latency 0.1 ms.
  // PS: rank 1 pushes the one block to its owner, rank 0, which sends it back.
  SimResult ps = simulate(net, profile, config_of(2, "ps", false, 1, 100));
  EXPECT_NEAR(ps.iteration_s * 1e3, 8 + 2 * (0.8 + 0.1), 1e-9);
  EXPECT_NEAR(ps.speedup(), 2 * 8 / (8 + 1.8), 1e-9);
  // All-reduce: 2 ring steps of half the weights each.
  SimResult ar = simulate(net, profile, config_of(2, "allreduce", false, 1, 100));
  EXPECT_NEAR(ar.iteration_s * 1e3, 8 + 2 * (0.4 + 0.1), 1e-9);
  // SFB: one step of 4 examples x (250 + 100) floats = 5,600 bytes (0.0448 ms),
  // then the rebuild, 2 * 250 * 100 * 4 * 2 flops at 1 GFLOP/s = 0.4 ms.
  SimResult sfb = simulate(net, profile, config_of(2, "sfb", false, 1, 100, 1));
  EXPECT_NEAR(sfb.iteration_s * 1e3, 8 + 0.0448 + 0.1 + 0.4, 1e-9);
  // Links: rank 0 receives and sends the block once per iteration.
  ASSERT_EQ(ps.links.size(), 2u);
  EXPECT_NEAR(ps.links[0].send_s * 1e3, 0.8, 1e-9);
  EXPECT_NEAR(ps.links[0].recv_s * 1e3, 0.8, 1e-9);
}

TEST(Simulate, TwoLayersOverlapByHand) {
  Net net(parse(kTwoFc), 1);
  const ComputeProfile profile = profile_of(net, {{"fc1", {2, 4}}, {"fc2", {1, 2}}}, 4);
  // fc2's weights (owner rank 0) move while fc1 runs backward (4 ms >= 2 x 1.0 ms
  // + 0.1 ms) and are back before the next forward reaches fc2; only fc1's
  // push and pull (2 x (0.8 + 0.1) ms) stand between backward and the next forward.
  SimResult on = simulate(net, profile, config_of(2, "ps", true, 1, 100));
  EXPECT_NEAR(on.iteration_s * 1e3, 9 + 2 * (0.8 + 0.1), 1e-9);
  // Without WFBP both groups start after backward, each on the other rank's
  // send link (fc1's owner is rank 1), so the longer, fc2's, is the wait.
  SimResult off = simulate(net, profile, config_of(2, "ps", false, 1, 100));
  EXPECT_NEAR(off.iteration_s * 1e3, 9 + 2 * (1.0 + 0.1), 1e-9);
}

TEST(Simulate, InfiniteBandwidthLeavesOnlyCompute) {
  Net net(parse(kSmall), 1);
  const ComputeProfile profile = flops_profile(net, 8, 0.5);
  for (const char* scheme : {"ps", "allreduce", "sfb", "hybrid"})
    for (bool wfbp : {true, false})
      for (const char* order : {"backward", "priority"})
        for (int workers : {2, 3, 8}) {
          SimConfig c = config_of(workers, scheme, wfbp, kInf, 0, kInf);
          c.dist.order = parse_send_order(order);
          c.dist.block_bytes = 512;
          const SimResult r = simulate(net, profile, c);
          EXPECT_NEAR(r.iteration_s, profile.iteration_s(), 1e-12 * profile.iteration_s())
              << scheme << " wfbp " << wfbp << " " << order << " P " << workers;
          EXPECT_NEAR(r.speedup(), workers, 1e-9 * workers);
        }
}

TEST(Simulate, BytesPerWorkerAreThePlanners) {
  Net net(parse(kSmall), 1);
  const ComputeProfile profile = flops_profile(net, 8, 0.5);
  for (const char* scheme : {"ps", "allreduce", "sfb", "hybrid"})
    for (int workers : {2, 3, 4, 8}) {
      SimConfig c = config_of(workers, scheme, true, 1, 20);
      c.dist.block_bytes = 1024;  // many blocks, spread over the owners
      c.dist.bucket_bytes = 2048;
      const SimResult r = simulate(net, profile, c);
      const CommPlan plan = simulation_plan(net, c.dist, workers, c.link, profile.batch);
      std::map<size_t, Scheme> by_layer;
      for (const PlannedParam& p : plan.params) by_layer[p.layer] = p.scheme;
      double expected = 0;
      for (const auto& [layer, s] : by_layer) {
        int64_t elements = 0;
        for (const Param& p : net.layer(layer).params()) elements += p.value.numel();
        const Shape& w = net.layer(layer).params()[0].shape;
        expected += s == Scheme::ps          ? ps_cost(elements, workers, c.link).bytes()
                    : s == Scheme::allreduce ? allreduce_cost(elements, workers, c.link).bytes()
                                             : sfb_cost(w[0], w[1], profile.batch, workers, c.link).bytes();
      }
      ASSERT_GT(expected, 0);
      EXPECT_NEAR(r.bytes_per_worker, expected, 1e-9 * expected) << scheme << " P " << workers;
    }
}

// Asserted where every unit moves the same kind of transfer (all small PS
// blocks, or all collectives) in backward order. Elsewhere the model finds
// WFBP can be slower when communication is nearly all there is: mixing
// collectives, which hold every link, with PS messages; priority order; or
// a whole parameter in one block whose owner serves 15 ranks (P = 16 at
// 1 Gbit/s: 28.2 against 27.6 ms), where earlier starts change which rank
// is served last and so which rank every iteration waits for.
TEST(Simulate, WfbpIsNeverSlower) {
  Net net(parse(kSmall), 1);
  ComputeProfile profile = flops_profile(net, 8, 0.5);
  profile.update_s = profile.iteration_s() / 20;
  for (const char* scheme : {"ps", "allreduce"})
    for (double gbps : {0.001, 0.01, 0.1, 1.0, 10.0})
      for (int workers : {2, 3, 4, 8, 16}) {
        SimConfig on = config_of(workers, scheme, true, gbps, 20, 5), off = on;
        on.dist.block_bytes = off.dist.block_bytes = 1024;
        on.dist.bucket_bytes = off.dist.bucket_bytes = 1024;
        off.dist.wfbp = false;
        const double t_on = simulate(net, profile, on).iteration_s, t_off = simulate(net, profile, off).iteration_s;
        EXPECT_LE(t_on, t_off * (1 + 1e-12)) << scheme << " " << gbps << " Gbit/s P " << workers;
      }
}

TEST(Simulate, OneWorkerHasSpeedupOne) {
  Net net(parse(kSmall), 1);
  ComputeProfile profile = flops_profile(net, 8, 0.5);
  profile.update_s = 0.003;
  for (const char* scheme : {"ps", "hybrid"}) {
    const SimResult r = simulate(net, profile, config_of(1, scheme, true, 1, 20));
    EXPECT_DOUBLE_EQ(r.speedup(), 1);
    EXPECT_DOUBLE_EQ(r.iteration_s, profile.iteration_s());
    EXPECT_EQ(r.bytes_per_worker, 0);
  }
}

TEST(Simulate, PlanIsTrainingsPlanAtTheProfilesBatch) {
  // fc1 (64 x 512 + 64): SFB moves 2K(P-1)(64+512) numbers against PS's
  // 4S(P-1)/P, so at P = 4 it wins at one example per rank and loses at 64.
  const char* model = R"(name: wide
inputs: {data: [512], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 64}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";
  DistConfig config;
  config.scheme = SchemeChoice::hybrid;
  const LinkModel link{10, 0, 1e6};
  Net one(parse(model), 1), wide(parse(model), 64);
  EXPECT_EQ(simulation_plan(one, config, 4, link, 1).groups[0].scheme, Scheme::sfb);
  const CommPlan simulated = simulation_plan(one, config, 4, link, 64);
  const CommPlan trained = plan_for_config(wide, config, 4, link);
  ASSERT_EQ(simulated.groups.size(), trained.groups.size());
  for (size_t u = 0; u < trained.groups.size(); ++u) {
    const SyncGroup &a = simulated.groups[u], &b = trained.groups[u];
    EXPECT_EQ(a.scheme, b.scheme);
    EXPECT_EQ(a.scheme, Scheme::ps);
    EXPECT_EQ(a.params, b.params);
    EXPECT_EQ(a.label, b.label);
    ASSERT_EQ(a.blocks.size(), b.blocks.size());
    for (size_t k = 0; k < a.blocks.size(); ++k) {
      EXPECT_EQ(a.blocks[k].owner, b.blocks[k].owner);
      EXPECT_EQ(a.blocks[k].count, b.blocks[k].count);
    }
  }
}

// fc1 100 -> 256, no bias: 25,600 weights (102,400 bytes, 0.8192 ms at 1
// Gbit/s), a multiple of the flat buffer's alignment, so an all-reduce bucket
// is the weights and nothing else.
const char* kAlignedFc = R"(name: aligned_fc
inputs: {data: [100], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 256, bias: false}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

TEST(DeviceCosts, FromTheProfileAndSlowed) {
  Net net(parse(kAlignedFc), 1);
  ComputeProfile profile = profile_of(net, {}, 4);
  profile.update_s = 2e-3;
  profile.memory_gbps = 0.3;
  const DeviceCosts c = device_costs(profile, net, 7);
  EXPECT_DOUBLE_EQ(c.update_s(25600), 2e-3);  // every parameter: the profile's update
  EXPECT_DOUBLE_EQ(c.update_s(6400), 0.5e-3);
  // Three arrays of 1,000 floats in, one out: 16,000 bytes at 0.3 GB/s.
  EXPECT_DOUBLE_EQ(c.sum_s(1000, 3), 16000 / 0.3e9);
  // 2 * 256 * 100 * 8 FLOPs at 7 GFLOP/s; with a bias, 8 rows of 256 summed too.
  EXPECT_DOUBLE_EQ(c.rebuild_s(256, 100, 8, false), 409600 / 7e9);
  EXPECT_DOUBLE_EQ(c.rebuild_s(256, 100, 8, true), 409600 / 7e9 + 9 * 4 * 256 / 0.3e9);
  const DeviceCosts slow = c.slowed(10);
  EXPECT_DOUBLE_EQ(slow.update_s(25600), 20e-3);
  EXPECT_DOUBLE_EQ(slow.sum_s(1000, 3), 10 * c.sum_s(1000, 3));
  EXPECT_DOUBLE_EQ(slow.rebuild_s(256, 100, 8, false), 10 * c.rebuild_s(256, 100, 8, false));
  // Without a memory bandwidth or a GEMM rate those costs are nothing.
  profile.memory_gbps.reset();
  EXPECT_EQ(device_costs(profile, net, 0).sum_s(1000, 3), 0);
  EXPECT_EQ(device_costs(profile, net, 0).rebuild_s(256, 100, 8, true), 0);
}

TEST(Simulate, UpdateAndSumsOnTheDeviceByHand) {
  Net net(parse(kAlignedFc), 1);
  ComputeProfile profile = profile_of(net, {{"fc1", {3, 5}}}, 4);
  profile.update_s = 2e-3;    // the whole update
  profile.memory_gbps = 0.3;  // GB/s: 1,000 floats summed from 3 arrays take 16,000 / 0.3e9 s
  const double transfer = 0.8192, latency = 0.1;
  // PS: push, the owner's sum of 2 pushes (3 x 102,400 bytes) and update, pull.
  SimResult ps = simulate(net, profile, config_of(2, "ps", false, 1, 100));
  EXPECT_NEAR(ps.iteration_s * 1e3, 8 + 2 * (transfer + latency) + 3 * 102400 / 0.3e6 + 2, 1e-9);
  // All-reduce: 2 ring steps of half the weights, the reduce-scatter's one
  // sum of 12,800 floats (3 x 51,200 bytes), then every rank's whole update.
  SimResult ar = simulate(net, profile, config_of(2, "allreduce", false, 1, 100));
  EXPECT_NEAR(ar.iteration_s * 1e3, 8 + 2 * (transfer / 2 + latency) + 3 * 51200 / 0.3e6 + 2, 1e-9);
  // SFB: one step of 4 examples x (256 + 100) floats = 5,696 bytes, the
  // rebuild (2 * 256 * 100 * 8 FLOPs at 1 GFLOP/s) and the whole update.
  SimResult sfb = simulate(net, profile, config_of(2, "sfb", false, 1, 100, 1));
  EXPECT_NEAR(sfb.iteration_s * 1e3, 8 + 5696 * 8 / 1e6 + latency + 0.4096 + 2, 1e-9);
  // One worker: forward, backward and the update.
  EXPECT_NEAR(ps.single_s * 1e3, 10, 1e-9);
}

TEST(Simulate, UpdatesWaitForOneAnotherOnTheDevice) {
  // With WFBP, fc2's update (owner rank 0) runs while fc1 computes backward;
  // fc1's (owner rank 1) runs after its push. Each owner's updates are
  // serial, so one owner holding both blocks takes both in turn: a bigger
  // update never makes an iteration shorter.
  Net net(parse(kTwoFc), 1);
  ComputeProfile profile = profile_of(net, {{"fc1", {2, 4}}, {"fc2", {1, 2}}}, 4);
  double last = 0;
  for (double update_ms : {0.0, 1.0, 4.0, 16.0}) {
    profile.update_s = update_ms / 1e3;
    const SimResult r = simulate(net, profile, config_of(2, "ps", true, 1, 100));
    EXPECT_GE(r.iteration_s, last) << update_ms;
    // At least fc1's share of the update lies between its push and pull.
    EXPECT_GE(r.iteration_s * 1e3, 9 + 2 * (0.8 + 0.1) + update_ms * 25000 / 56250 - 1e-9) << update_ms;
    last = r.iteration_s;
  }
}

TEST(SimulateProfile, ErrorsNameTheFileAndTheLayer) {
  Net net(parse(kTwoFc), 1);
  poseidon::testing::TempDir dir;
  try {
    load_profile(dir.file("absent.json"), net);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("absent.json")), std::string::npos) << e.what();
  }
  const std::string path = dir.write("p.json", R"({"batch": 4, "layers": [
    {"name": "fc1", "forward_ms": 1, "backward_ms": 2}, {"name": "loss", "forward_ms": 0, "backward_ms": 0}]})");
  try {
    load_profile(path, net);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find("'fc2'"), std::string::npos) << what;
  }
  const std::string good =
      dir.write("q.json", R"({"batch": 4, "update_ms": 3, "gflops": 100, "memory_gbps": 50, "layers": [
    {"name": "fc1", "forward_ms": 1, "backward_ms": 2}, {"name": "fc2", "forward_ms": 0.5, "backward_ms": 1},
    {"name": "loss", "forward_ms": 0, "backward_ms": 0}]})");
  const ComputeProfile p = load_profile(good, net);
  EXPECT_EQ(p.batch, 4);
  EXPECT_DOUBLE_EQ(p.iteration_s(), 7.5e-3);
  EXPECT_DOUBLE_EQ(p.backward_s[1], 1e-3);
  EXPECT_EQ(p.gemm_gflops, 100);
  EXPECT_EQ(p.memory_gbps, 50);
  // Without "gflops" the GEMM rate is the fc layers' forward FLOPs over their forward time.
  const std::string measured = dir.write("m.json", R"({"batch": 4, "layers": [
    {"name": "fc1", "forward_ms": 1, "backward_ms": 2}, {"name": "fc2", "forward_ms": 0.5, "backward_ms": 1},
    {"name": "loss", "forward_ms": 7, "backward_ms": 0}]})");
  const ComputeProfile m = load_profile(measured, net);
  double flops = 0;
  for (size_t i : {size_t{0}, size_t{1}}) flops += net.layer(i).forward_flops(net.layer_input_shapes(i));
  ASSERT_GT(flops, 0);
  ASSERT_TRUE(m.gemm_gflops.has_value());
  EXPECT_TRUE(m.gemm_from_fc_layers);
  EXPECT_DOUBLE_EQ(*m.gemm_gflops, flops * 4 / 1.5e-3 / 1e9);  // net batch 1, profile batch 4
  EXPECT_FALSE(p.gemm_from_fc_layers);
  const std::string bad = dir.write("r.json", R"({"batch": 4, "memory_gbps": 0, "layers": []})");
  try {
    load_profile(bad, net);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("memory_gbps"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace poseidon::dist
