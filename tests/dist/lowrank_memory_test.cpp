// Low-rank compression's memory. A layer's exchange holds one buffer of the
// weight's size, its error memory (which holds M = gradient + error memory
// during an iteration), beside the rank-r factors. Checkpoints of its state
// cost every rank about one rank's state in memory, whatever the rank
// count: the saving rank receives the other ranks' error memories one at a
// time while it writes, the others only send theirs, and a resuming rank
// leaves the error memories in the file (it reads its own slice later).
// Bytes are counted by a replaced global operator new
// (tests/counted_new.inc), inside a counting window only, on every thread;
// MPI's own buffers (malloc) are not counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "core/checkpoint.h"
#include "dist/schemes/exchange_compute.h"
#include "dist/schemes/lowrank.h"
#include "dist/session/scheduler.h"
#include "tests/dist/compression_fixture.h"
#include "tests/dist/test_world.h"

#include "../counted_new.inc"

namespace poseidon::testing {
namespace {

// The most bytes `work` held allocated at once, on every thread.
int64_t peak_bytes_during(const std::function<void()>& work) {
  bytes_outstanding = 0;
  bytes_peak = 0;
  counting = true;
  try {
    work();
  } catch (...) {
    counting = false;
    throw;
  }
  counting = false;
  return bytes_peak;
}

// Headers, names and bookkeeping: far below any layer's state.
constexpr int64_t kSlack = 256 << 10;

// The exchange's arithmetic without the solver update, whose state is not
// the exchange's.
class NoUpdate : public dist::HostCompute {
 public:
  void update(Solver&, const std::vector<Param*>&, const dist::WorkDone& done) override { done(); }
};

Param param_of(const std::string& name, Shape shape) {
  Param p;
  p.name = name;
  p.shape = shape;
  p.value = Tensor(shape);
  p.grad = Tensor(shape);
  return p;
}

TEST(LowRankMemory, ALayerHoldsOneWeightSizedBufferBesideItsFactors) {
  const dist::World& world = test_world();
  constexpr int64_t kRows = 1024, kCols = 512;
  constexpr int kRank = 4;
  Param weight = param_of("fc.weight", {kRows, kCols}), bias = param_of("fc.bias", {kRows});
  Solver solver(SolverConfig{});
  NoUpdate compute;
  std::mt19937 rng(static_cast<uint32_t>(world.rank() + 1));
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::unique_ptr<dist::LowRankExchange> exchange;
  int64_t held = 0;
  const int64_t peak = peak_bytes_during([&] {
    exchange = std::make_unique<dist::LowRankExchange>(dist::Comm(world), solver, compute,
                                                       std::vector<Param*>{&weight, &bias}, kRank, "fc");
    for (int it = 0; it < 2; ++it) {
      for (int64_t i = 0; i < weight.grad.numel(); ++i) weight.grad.data()[i] = unit(rng);
      for (int64_t i = 0; i < bias.grad.numel(); ++i) bias.grad.data()[i] = unit(rng);
      dist::InFlight in_flight;
      exchange->start(in_flight);
      while (!in_flight.empty()) in_flight.poll();
    }
    held = bytes_outstanding;
  });
  constexpr int64_t kWeightBytes = kRows * kCols * static_cast<int64_t>(sizeof(float));
  // Q and P, and the send and receive buffers of the larger of P with the bias, and Q.
  constexpr int64_t kFactorBytes =
      (kCols * kRank + kRows * kRank + 2 * std::max(kRows * kRank + kRows, kCols * kRank)) *
      static_cast<int64_t>(sizeof(float));
  EXPECT_GE(held, kWeightBytes) << "the error memory is not among what the exchange holds";
  EXPECT_LE(peak, kWeightBytes + kFactorBytes + kSlack)
      << "a " << kRows << " x " << kCols << " layer's exchange at rank " << kRank << " held " << peak
      << " bytes at its peak: more than its error memory of " << kWeightBytes << " and factors of " << kFactorBytes;
  exchange.reset();
}

TEST(LowRankCheckpointMemory, SaveAndLoadNeedAtMostOneRanksErrorMemoryMore) {
  const dist::World& world = test_world();
  if (world.size() < 2) GTEST_SKIP() << "needs several ranks";
  constexpr int64_t kPerRank = 4;
  constexpr int kIterations = 3;
  Net net(lenet_config(), kPerRank);
  net.init_params(7);
  Solver solver(solver_config("sgd", kIterations));
  dist::DistConfig config;
  config.scheme = dist::SchemeChoice::hybrid;
  config.lowrank = true;
  config.lowrank_rank = 2;
  std::map<size_t, dist::Scheme> every_layer_lowrank;
  int64_t error_bytes = 0;  // one rank's error memory: every weight's
  for (const dist::PlannedParam& p : dist::backward_order(net)) {
    every_layer_lowrank[p.layer] = dist::Scheme::lowrank;
    if (p.param->shape.size() > 1) error_bytes += p.param->value.numel() * static_cast<int64_t>(sizeof(float));
  }
  dist::SchedulerOptions options;
  options.config = config;
  dist::Scheduler scheduler(net, solver, world, dist::plan_for_config(net, config, world.size(), {}, &every_layer_lowrank),
                            std::move(options));
  std::mt19937_64 rng(11);
  RunContext ctx{Phase::train, &rng, {}};
  for (int it = 0; it < kIterations; ++it) {
    fill_examples(net, (it * world.size() + world.rank()) * kPerRank);
    net.forward(ctx, &scheduler);
    net.backward(ctx, scheduler);
  }
  scheduler.sync();
  const Solver snapshot = scheduler.solver_snapshot();

  const std::string plain = shared_path("checkpoint_memory_plain"), full = shared_path("checkpoint_memory_full");
  // The same checkpoint without compression state: what saving costs anyway.
  int64_t plain_save = 0;
  if (world.rank() == 0) plain_save = peak_bytes_during([&] { save_checkpoint(plain, net, &snapshot, {}); });
  const int64_t save = peak_bytes_during([&] {
    scheduler.save_with_compression_state([&](const std::vector<StreamedTensor>& compression) {
      save_checkpoint(full, net, &snapshot, {}, compression);
    });
  });
  POSEIDON_MPI(MPI_Barrier(MPI_COMM_WORLD));  // both files are written

  Net loaded(lenet_config(), kPerRank);
  Solver loaded_solver(solver_config("sgd", kIterations));
  std::map<std::string, DeferredTensor> state;
  const int64_t plain_load = peak_bytes_during([&] { load_checkpoint(plain, loaded, &loaded_solver, &state); });
  const int64_t load = peak_bytes_during([&] { load_checkpoint(full, loaded, &loaded_solver, &state); });
  const int64_t entries = static_cast<int64_t>(state.size());
  state.clear();
  POSEIDON_MPI(MPI_Barrier(MPI_COMM_WORLD));  // every rank has read both
  if (world.rank() == 0) {
    std::filesystem::remove(plain);
    std::filesystem::remove(full);
  }

  EXPECT_EQ(entries, 2 * 4) << "Q and the error memory of LeNet's four weights";
  if (world.rank() == 0)
    EXPECT_LE(save, plain_save + error_bytes + kSlack)
        << "saving " << world.size() << " ranks' error memories of " << error_bytes
        << " bytes each took more than one rank's beside the plain checkpoint's " << plain_save;
  else
    EXPECT_LE(save, kSlack) << "a rank that only sends its error memory allocated";
  EXPECT_LE(load, plain_load + kSlack) << "loading read error memories that stay in the file";
}

}  // namespace
}  // namespace poseidon::testing
