// Emulated compute in a distributed run (dist::Scheduler with DeviceCosts):
// updates, sums and SFB rebuilds become waits on the emulated device, so the
// parameters stay as they started, identical on every rank, and the run
// takes at least the device time each rank's share of the work costs; on
// the bf16 wire too, whose conversions an emulated device leaves out.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "dist/schemes/emulated_compute.h"
#include "dist/session/scheduler.h"
#include "tests/dist/test_world.h"

namespace poseidon::testing {
namespace {

constexpr int kIterations = 3;
constexpr double kUpdateS = 0.03;  // every parameter's update, per iteration

uint64_t hash_of(const float* v, int64_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v);
  for (size_t i = 0; i < static_cast<size_t>(n) * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

class Emulated : public ::testing::TestWithParam<std::string> {};

TEST_P(Emulated, WaitsTheDeviceTimeAndLeavesTheParametersAsTheyWere) {
  const dist::World& world = test_world();
  Net net(ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"), 4);
  net.init_params(7);
  const std::vector<float> before(net.flat_values().data(), net.flat_values().data() + net.flat_values().numel());
  SolverConfig sc;
  sc.momentum = 0.9;
  sc.lr.base_lr = 0.1;
  Solver solver(sc);
  // "<scheme>" or "<scheme>_bf16".
  const std::string param = GetParam();
  const bool bf16 = param.ends_with("_bf16");
  const std::string scheme = bf16 ? param.substr(0, param.size() - 5) : param;
  dist::DistConfig config;
  config.scheme = dist::parse_scheme_choice(scheme);
  if (bf16) config.wire = dist::Wire::bf16;
  config.block_bytes = 64 << 10;
  config.bucket_bytes = 64 << 10;
  dist::DeviceCosts device;
  device.update_s_per_param = kUpdateS / static_cast<double>(net.num_learnable());
  device.memory_gbps = 10;
  device.gemm_gflops = 10;
  dist::SchedulerOptions options;
  options.config = config;
  options.compute = std::make_shared<dist::EmulatedExchangeCompute>(device);
  dist::Scheduler scheduler(net, solver, world, dist::plan_for_config(net, config, world.size()), std::move(options));
  net.flat_grads().fill(1.f);  // what a real update would apply
  RunContext ctx;
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < kIterations; ++it) {
    net.blob("label").value.fill(1.f);
    net.forward(ctx, &scheduler);
    net.backward(ctx, scheduler);
  }
  scheduler.sync();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const uint64_t mine = hash_of(net.flat_values().data(), net.flat_values().numel());
  std::vector<uint64_t> hashes(world.size());
  scheduler.run([&](const dist::Comm& c) {
    POSEIDON_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, c.handle()));
  });
  for (size_t r = 1; r < hashes.size(); ++r) EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r;
  EXPECT_EQ(std::memcmp(net.flat_values().data(), before.data(), before.size() * sizeof(float)), 0)
      << "an emulated update changed a parameter";
  // All-reduce updates everything on every rank; a PS owner its share, and
  // the other schemes put at least the convolutions on PS.
  const double share = scheme == "allreduce" ? kUpdateS : kUpdateS / world.size();
  EXPECT_GE(elapsed, kIterations * share);
}

INSTANTIATE_TEST_SUITE_P(Schemes, Emulated, ::testing::Values("ps", "allreduce", "sfb", "hybrid", "ps_bf16", "allreduce_bf16"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace poseidon::testing
