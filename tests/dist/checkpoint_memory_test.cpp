// Checkpoints of low-rank compression's state cost every rank about one
// rank's state in memory, whatever the rank count: the saving rank receives
// the other ranks' error memories one at a time while it writes, the others
// only send theirs, and a resuming rank leaves the error memories in the file
// (it reads its own slice later). Bytes are counted by a replaced global
// operator new (tests/counted_new.inc), inside a counting window only, on
// every thread; MPI's own buffers (malloc) are not counted.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>

#include "core/checkpoint.h"
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
