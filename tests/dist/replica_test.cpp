// Acceptance of the schemes: LeNet, and VGG19-22K at reduced width and input
// size, trained 20 iterations on P ranks with K examples each end with
// parameters that are bitwise identical on every rank and equal, to relative
// 1e-4 (L2 norm per tensor), to one process trained on the combined batch of
// P*K; the gathered optimizer state matches too. Each rank computes the
// single-process reference itself. The "offload" cases hand the all-reduce
// sums and SFB's rebuild GEMMs to stand-ins of a GPU's (dist::DeviceOffload:
// a reduce to rank 0 and a broadcast, as NCCL gives every rank the same sum,
// and the host's gemm), which must change nothing but who computes. Adam,
// AdamW and RMSprop cases check that their sharded state (moments and step
// counts) is gathered to the single process's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "core/local_sink.h"
#include "core/math.h"
#include "dist/scheduler.h"
#include "tests/dist/test_world.h"
#include "tests/dist/training_fixture.h"

namespace poseidon::testing {
namespace {

constexpr int64_t kPerRank = 4;
constexpr int kIterations = 20;

struct Trained {
  std::vector<float> values;
  std::map<std::string, std::vector<float>> momentum;  // rank 0's gathered state (distributed)
  std::map<std::string, int64_t> steps;
};

Trained copy_of(Net& net, const Solver& solver) {
  Trained t;
  t.values.assign(net.flat_values().data(), net.flat_values().data() + net.flat_values().numel());
  for (const auto& [name, buf] : solver.state()) t.momentum[name].assign(buf.data(), buf.data() + buf.numel());
  t.steps = solver.steps();
  return t;
}

Trained train_single(const std::string& model, int ranks, const std::string& solver_type) {
  Net net(model_config(model), kPerRank * ranks);
  net.init_params(7);
  Solver solver(solver_config(solver_type, kIterations));
  LocalGradSink sink(solver);
  std::mt19937_64 rng(11);  // dropout layers need one even at ratio 0
  RunContext ctx{Phase::train, &rng, {}};
  for (int it = 0; it < kIterations; ++it) {
    fill_examples(net, it * kPerRank * ranks);
    solver.set_iteration(it);
    net.forward(ctx);
    net.backward(ctx, sink);
  }
  return copy_of(net, solver);
}

struct DistRun {
  Trained trained;
  std::vector<uint64_t> hashes;  // of every rank's parameters
  dist::CommStats stats;
  int device_sums = 0, device_rebuilds = 0;  // calls of the offload's stand-ins
};

// A stand-in for NCCL on the host: the sum reduced to rank 0, then broadcast
// (every rank gets rank 0's bits), driven by the test of whether it landed.
std::function<bool()> start_sum(const dist::Comm& comm, float* grads, int64_t count) {
  struct Sum {
    MPI_Request request = MPI_REQUEST_NULL;
    bool broadcasting = false;
  };
  auto sum = std::make_shared<Sum>();
  const bool root = comm.rank() == 0;
  POSEIDON_MPI(MPI_Ireduce(root ? MPI_IN_PLACE : grads, root ? grads : nullptr, static_cast<int>(count), MPI_FLOAT,
                           MPI_SUM, 0, comm.handle(), &sum->request));
  return [sum, &comm, grads, count] {
    int done = 0;
    POSEIDON_MPI(MPI_Test(&sum->request, &done, MPI_STATUS_IGNORE));
    if (!done) return false;
    if (sum->broadcasting) return true;
    sum->broadcasting = true;
    POSEIDON_MPI(MPI_Ibcast(grads, static_cast<int>(count), MPI_FLOAT, 0, comm.handle(), &sum->request));
    return false;
  };
}

DistRun train_distributed(const std::string& model, const dist::DistConfig& config, bool offload,
                          const std::string& solver_type) {
  const dist::World& world = test_world();
  Net net(model_config(model), kPerRank);
  net.init_params(7);
  Solver solver(solver_config(solver_type, kIterations));
  DistRun run;
  dist::CommPlan plan = dist::plan_for_config(net, config, world.size());
  // The stand-in's collectives, a communicator per bucket (as NCCL's calls,
  // they start in the same order everywhere, but a bucket's broadcast
  // follows its reduce whenever that ends, so buckets must not share one).
  const dist::Comm base(world);
  std::map<const float*, std::unique_ptr<dist::Comm>> sums;
  dist::DeviceOffload device;
  if (offload) {
    for (const dist::SyncGroup& unit : plan.groups)
      if (unit.scheme == dist::Scheme::allreduce)
        sums[net.flat_grads().data() + unit.begin] = std::make_unique<dist::Comm>(base.duplicate());
    device.allreduce_sum = [&](float* grads, int64_t count) {
      ++run.device_sums;
      return start_sum(*sums.at(grads), grads, count);
    };
    device.rebuild_gemm = [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                              const float* b, float beta, float* c) {
      ++run.device_rebuilds;
      gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
    };
  }
  dist::SchedulerOptions options;
  options.config = config;
  options.offload = device;
  dist::Scheduler scheduler(net, solver, world, std::move(plan), std::move(options));
  std::mt19937_64 rng(11);  // dropout layers need one even at ratio 0
  RunContext ctx{Phase::train, &rng, {}};
  for (int it = 0; it < kIterations; ++it) {
    fill_examples(net, (it * world.size() + world.rank()) * kPerRank);
    net.forward(ctx, &scheduler);
    net.backward(ctx, scheduler);
  }
  scheduler.sync();
  run.stats = scheduler.take_stats();
  Solver snapshot = scheduler.solver_snapshot();
  run.trained = copy_of(net, snapshot);
  const uint64_t mine = hash_of(run.trained.values);
  run.hashes.resize(world.size());
  scheduler.run([&](const dist::Comm& c) {
    POSEIDON_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, run.hashes.data(), 1, MPI_UINT64_T, c.handle()));
  });
  return run;
}

double relative_l2(const float* a, const float* b, int64_t n) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

struct Case {
  std::string model;
  std::string scheme;
  bool wfbp;
  std::string order = "backward";
  bool offload = false;
  std::string solver = "sgd";
};

class Replicas : public ::testing::TestWithParam<Case> {};

TEST_P(Replicas, IdenticalOnEveryRankAndEqualToTheCombinedBatch) {
  dist::DistConfig config;
  config.scheme = dist::parse_scheme_choice(GetParam().scheme);
  config.wfbp = GetParam().wfbp;
  config.order = dist::parse_send_order(GetParam().order);
  config.block_bytes = 64 << 10;   // lenet's fc1.weight spans many blocks and every owner
  config.bucket_bytes = 64 << 10;  // several buckets
  const std::string& model = GetParam().model;
  DistRun run = train_distributed(model, config, GetParam().offload, GetParam().solver);
  Trained single = train_single(model, test_world().size(), GetParam().solver);

  for (size_t r = 1; r < run.hashes.size(); ++r)
    EXPECT_EQ(run.hashes[r], run.hashes[0]) << "rank " << r << "'s parameters differ from rank 0's";
  Net shapes(model_config(model), 1);
  for (Param* p : shapes.params()) {
    const int64_t at = p->value.data() - shapes.flat_values().data();
    EXPECT_LE(relative_l2(run.trained.values.data() + at, single.values.data() + at, p->value.numel()), 1e-4)
        << p->name;
    if (test_world().rank() != 0) continue;
    ASSERT_TRUE(run.trained.momentum.count(p->name)) << "momentum of " << p->name << " missing from the snapshot";
    EXPECT_LE(
        relative_l2(run.trained.momentum.at(p->name).data(), single.momentum.at(p->name).data(), p->value.numel()),
        1e-4)
        << "momentum of " << p->name;
    if (single.steps.count(p->name)) {
      EXPECT_EQ(run.trained.steps[p->name], single.steps.at(p->name)) << "step count of " << p->name;
    }
  }
  // The parameters moved: training happened.
  Net fresh(model_config(model), 1);
  fresh.init_params(7);
  EXPECT_GT(relative_l2(run.trained.values.data(), fresh.flat_values().data(), fresh.flat_values().numel()), 1e-3);
  EXPECT_EQ(run.stats.iterations, kIterations);
  const bool summed_elsewhere = GetParam().offload && GetParam().scheme == "allreduce";
  if (test_world().size() > 1) {
    // MPI moves the bytes the scheduler counts, unless the sums went elsewhere.
    if (summed_elsewhere) {
      EXPECT_GT(run.device_sums, 0);
    } else {
      EXPECT_GT(run.stats.bytes_sent, 0);
    }
  }
  if (GetParam().offload && GetParam().scheme == "sfb") {
    EXPECT_GT(run.device_rebuilds, 0);
  }
  if (!GetParam().offload) {
    EXPECT_EQ(run.device_sums + run.device_rebuilds, 0);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* model : {"lenet", "vgg"})
    for (Case c :
         {Case{"", "ps", true}, Case{"", "ps", false}, Case{"", "allreduce", true}, Case{"", "allreduce", false},
          Case{"", "sfb", true}, Case{"", "sfb", false}, Case{"", "hybrid", true}, Case{"", "hybrid", false},
          Case{"", "ps", true, "priority"}, Case{"", "ps", false, "priority"}, Case{"", "hybrid", true, "priority"}}) {
      c.model = model;
      out.push_back(c);
    }
  for (Case c : {Case{"lenet", "allreduce", true}, Case{"lenet", "allreduce", false}, Case{"lenet", "sfb", true},
                 Case{"lenet", "hybrid", true}}) {
    c.offload = true;
    out.push_back(c);
  }
  for (Case c : {Case{"lenet", "ps", true}, Case{"lenet", "allreduce", true}, Case{"lenet", "sfb", true},
                 Case{"lenet", "hybrid", false}, Case{"vgg", "hybrid", true}}) {
    c.solver = "adam";
    out.push_back(c);
  }
  for (const char* solver : {"adamw", "rmsprop"}) {
    Case c{"lenet", "hybrid", true, "priority"};
    c.solver = solver;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schemes, Replicas, ::testing::ValuesIn(cases()), [](const auto& info) {
  return info.param.model + "_" + info.param.scheme + (info.param.wfbp ? "_wfbp" : "_no_wfbp") +
         (info.param.order == "priority" ? "_priority" : "") + (info.param.offload ? "_offload" : "") +
         (info.param.solver == "sgd" ? "" : "_" + info.param.solver);
});

}  // namespace
}  // namespace poseidon::testing
