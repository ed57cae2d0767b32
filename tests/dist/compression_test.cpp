// Compression (dist/plan/wire.h, dist/schemes/lowrank.h): the bf16 wire format's rounding,
// and LeNet trained on P ranks with bf16 gradients on the parameter server
// and all-reduce, and with every layer compressed to low rank. Replicas end
// bitwise identical, and equal, bit for bit, to one process that computes
// each rank's gradient from its shard and applies the same arithmetic (the
// same conversions, the same summation order, the same low-rank steps).
// Low-rank state (Q, every rank's error memory) goes through a checkpoint
// and a resumed run continues bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <vector>

#include "core/checkpoint.h"
#include "dist/plan/compression_plan.h"
#include "dist/plan/wire.h"
#include "dist/schemes/lowrank.h"
#include "dist/session/scheduler.h"
#include "dist/sim/simulate.h"
#include "tests/dist/compression_fixture.h"
#include "tests/dist/test_world.h"

namespace poseidon::testing {
namespace {

constexpr int64_t kPerRank = 4;
constexpr int kIterations = 12;
constexpr int kRank = 2;

TEST(Bf16, RoundsToNearestEven) {
  auto bits = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  };
  auto from_bits = [](uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  EXPECT_EQ(dist::to_bf16(1.f), 0x3f80);
  EXPECT_EQ(dist::to_bf16(from_bits(0x3f808000u)), 0x3f80);  // a tie: down to the even significand
  EXPECT_EQ(dist::to_bf16(from_bits(0x3f818000u)), 0x3f82);  // a tie: up to the even significand
  EXPECT_EQ(dist::to_bf16(from_bits(0x3f808001u)), 0x3f81);  // above the tie: up
  EXPECT_EQ(dist::to_bf16(from_bits(0x3f807fffu)), 0x3f80);  // below the tie: down
  EXPECT_EQ(bits(dist::from_bf16(dist::to_bf16(-2.5f))), bits(-2.5f));
  EXPECT_TRUE(std::isinf(dist::from_bf16(dist::to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(dist::from_bf16(dist::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(dist::from_bf16(dist::to_bf16(from_bits(0x7f800001u)))));  // a signalling NaN stays a NaN
}

TEST(LowRank, OrthogonalisedColumnsAreOrthonormal) {
  const int64_t rows = 7;
  const int rank = 3;
  std::vector<float> p(rows * rank);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  for (float& v : p) v = unit(rng);
  dist::orthogonalise_columns(p.data(), rows, rank);
  for (int a = 0; a < rank; ++a)
    for (int b = 0; b < rank; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += double(p[i * rank + a]) * p[i * rank + b];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5) << a << " " << b;
    }
}

TEST(CompressionConfig, ParsesAndRefusesWhatCannotRun) {
  auto parse = [](const std::string& yaml) { return dist::DistConfig::parse(ConfigNode::parse(yaml, "dist.yaml")); };
  const dist::DistConfig c = parse("wire: bf16\nlowrank: true\nlowrank_rank: 2\n");
  EXPECT_EQ(c.wire, dist::Wire::bf16);
  EXPECT_TRUE(c.lowrank);
  EXPECT_EQ(c.lowrank_rank, 2);
  EXPECT_EQ(parse("scheme: ps\n").wire, dist::Wire::fp32);
  EXPECT_THROW(parse("wire: fp16\n"), Error);
  EXPECT_THROW(parse("scheme: ps\nlowrank: true\n"), Error);  // a choice of the hybrid planner
  EXPECT_THROW(parse("lowrank_rank: 0\n"), Error);
}

TEST(CompressionPlan, BucketsHoldOneWireFormat) {
  Net net(lenet_config(), kPerRank);
  dist::DistConfig config;
  config.scheme = dist::SchemeChoice::allreduce;
  config.bucket_bytes = 64 << 20;  // everything would fit one bucket
  std::map<size_t, dist::Wire> wires;
  for (size_t l = 0; l < net.num_layers(); ++l)
    if (net.layer(l).name() == "conv2") wires[l] = dist::Wire::bf16;
  const dist::CommPlan plan = dist::plan_for_config(net, config, 2, {}, nullptr, &wires);
  int bf16_groups = 0;
  for (const dist::SyncGroup& g : plan.groups) {
    for (size_t i : g.params) {
      const bool conv2 = net.layer(plan.params[i].layer).name() == "conv2";
      EXPECT_EQ(g.wire, conv2 ? dist::Wire::bf16 : dist::Wire::fp32) << plan.params[i].param->name;
      EXPECT_EQ(plan.params[i].wire, g.wire);
    }
    if (g.wire == dist::Wire::bf16) ++bf16_groups;
  }
  EXPECT_EQ(bf16_groups, 1);
  EXPECT_EQ(plan.groups.size(), 3u);  // fc2 and fc1; conv2; conv1
}

TEST(CompressionPlan, PlannerChoosesLowRankOnlyWhenAskedAndFaster) {
  Net net(lenet_config(), 64);              // at 64 examples a rank SFB's factors outweigh fc1's low-rank ones
  const dist::LinkModel slow{0.1, 20, 50};  // 100 Mbit/s: bytes dominate
  dist::DistConfig config;
  config.lowrank_rank = 4;
  auto schemes = [&](const dist::DistConfig& c, const dist::LinkModel& link) {
    std::map<std::string, dist::Scheme> out;
    const dist::CommPlan plan = dist::plan_for_config(net, c, 4, link);
    for (const dist::PlannedParam& p : plan.params) out[net.layer(p.layer).name()] = p.scheme;
    return out;
  };
  for (const auto& [layer, scheme] : schemes(config, slow)) EXPECT_NE(scheme, dist::Scheme::lowrank) << layer;
  config.lowrank = true;
  const auto chosen = schemes(config, slow);
  EXPECT_EQ(chosen.at("fc1"), dist::Scheme::lowrank);  // 400,000 numbers against 5,200 factors a rank
  EXPECT_EQ(chosen.at("conv2"), dist::Scheme::lowrank);
  // Its GEMMs are charged: at 1 MFLOP/s they cost more than the bytes save.
  const dist::LinkModel slow_gemm{0.1, 20, 1e-3};
  for (const auto& [layer, scheme] : schemes(config, slow_gemm)) EXPECT_NE(scheme, dist::Scheme::lowrank) << layer;
  // The traffic: 4 (P - 1) / P (r (n + m) + b) numbers, two ring all-reduces.
  EXPECT_DOUBLE_EQ(dist::lowrank_cost(500, 800, 500, 4, 4, slow).numbers, 4.0 * 3 / 4 * (4 * (500 + 800) + 500));
  // Per rank, about the same at any P: less than twice the factors, never growing past it.
  EXPECT_LT(dist::lowrank_cost(500, 800, 500, 4, 512, slow).numbers, 4.0 * (4 * (500 + 800) + 500));
}

// The bf16 wire is charged by the same model as fp32, the large-cluster one
// included (fused all-reduce of the fastest algorithm, the incast of spread
// PS blocks): halving the bytes never sends a layer from all-reduce, which
// bf16 halves, to PS, whose pulls it keeps at fp32; and the simulated
// iteration is not slower. (Charged apart, with a lone ring's 2 (P - 1)
// latencies against PS without its incast, bf16 put every layer on PS at 512
// ranks and was slower than fp32.)
TEST(CompressionPlan, Bf16IsPlannedWithTheLargeClusterModel) {
  Net net(lenet_config(), 1);
  const dist::ComputeProfile profile = dist::flops_profile(net, 64, 5);
  dist::SimConfig c;
  c.workers = 512;
  c.iterations = 4;
  c.link = dist::LinkModel{100, 20, 50};
  c.dist.collective.allreduce = dist::AllreduceAlgorithm::automatic;
  c.dist.collective.fusion_auto = true;
  c.dist.collective.spread_blocks = true;
  auto plan = [&](dist::Wire wire) {
    c.dist.wire = wire;
    std::map<std::string, dist::Scheme> out;
    for (const dist::PlannedParam& p : dist::simulation_plan(net, c.dist, c.workers, c.link, profile.batch).params)
      out[net.layer(p.layer).name()] = p.scheme;
    return out;
  };
  const auto fp32 = plan(dist::Wire::fp32), bf16 = plan(dist::Wire::bf16);
  int on_allreduce = 0;
  for (const auto& [layer, scheme] : fp32)
    if (scheme == dist::Scheme::allreduce) {
      ++on_allreduce;
      EXPECT_EQ(bf16.at(layer), dist::Scheme::allreduce) << layer;
    }
  EXPECT_GT(on_allreduce, 0) << "at 512 ranks the large-cluster model puts layers on all-reduce";
  c.dist.wire = dist::Wire::fp32;
  const dist::SimResult slow = dist::simulate(net, profile, c);
  c.dist.wire = dist::Wire::bf16;
  const dist::SimResult fast = dist::simulate(net, profile, c);
  EXPECT_LT(fast.bytes_per_worker, slow.bytes_per_worker);
  EXPECT_LE(fast.iteration_s, slow.iteration_s);
  // The costs: PS pushes halved, its pulls kept; every all-reduce step halved.
  const dist::LinkModel link{100, 0, 50};
  EXPECT_DOUBLE_EQ(dist::ps_cost(1 << 20, 512, link, 64, 4096, dist::Wire::bf16).numbers,
                   dist::ps_cost(1 << 20, 512, link, 64, 4096).numbers * 3 / 4);
  EXPECT_DOUBLE_EQ(dist::allreduce_cost(1 << 20, 512, link, c.dist.collective, 4 << 20, dist::Wire::bf16).numbers,
                   dist::allreduce_cost(1 << 20, 512, link, c.dist.collective, 4 << 20).numbers / 2);
}

// The simulator moves the bytes the planner charges: bf16 halves an
// all-reduce and a quarter of PS; low-rank moves its factors.
TEST(CompressionSimulation, BytesPerWorkerAreThePlanners) {
  Net net(lenet_config(), 1);
  const dist::ComputeProfile profile = dist::flops_profile(net, 64, 5);
  dist::SimConfig c;
  c.workers = 4;
  c.link = dist::LinkModel{0.1, 20, 50};
  c.dist.block_bytes = 16 << 10;
  auto bytes = [&](dist::SchemeChoice scheme, dist::Wire wire, bool lowrank) {
    c.dist.scheme = scheme;
    c.dist.wire = wire;
    c.dist.lowrank = lowrank;
    return dist::simulate(net, profile, c).bytes_per_worker;
  };
  const double ar = bytes(dist::SchemeChoice::allreduce, dist::Wire::fp32, false);
  EXPECT_NEAR(bytes(dist::SchemeChoice::allreduce, dist::Wire::bf16, false), ar / 2, ar * 1e-9);
  const double ps = bytes(dist::SchemeChoice::ps, dist::Wire::fp32, false);
  EXPECT_NEAR(bytes(dist::SchemeChoice::ps, dist::Wire::bf16, false), ps * 3 / 4, ps * 1e-9);
  // Hybrid with low-rank: the low-rank layers move 4 (P - 1) / P (r (n + m) + b)
  // numbers each, the others what their scheme moves.
  const double hybrid = bytes(dist::SchemeChoice::hybrid, dist::Wire::fp32, true);
  const dist::CommPlan plan = dist::simulation_plan(net, c.dist, 4, c.link, profile.batch);
  double expected = 0;
  int lowrank_layers = 0;
  for (const dist::SyncGroup& g : plan.groups) {
    const Shape& w = plan.params[g.params[0]].param->shape;
    const int64_t rows = w[0], cols = shape_numel(w) / rows;
    ASSERT_NE(g.scheme, dist::Scheme::allreduce) << g.label;
    if (g.scheme == dist::Scheme::lowrank) {
      ++lowrank_layers;
      expected += dist::lowrank_cost(rows, cols, rows, c.dist.lowrank_rank, 4, c.link).bytes();
    } else if (g.scheme == dist::Scheme::ps) {
      expected += dist::ps_cost(plan.params[g.params[0]].param->value.numel(), 4, c.link).bytes();
    } else {
      expected += dist::sfb_cost(rows, cols, profile.batch, 4, c.link).bytes();
    }
  }
  EXPECT_GE(lowrank_layers, 2);
  EXPECT_NEAR(hybrid, expected, expected * 1e-6);
}

// Backward writes every gradient into the Net's flat buffer; this sink only
// lets it.
class KeepGradients : public GradSink {
 public:
  void grad_ready(Param&) override {}
};

struct Compression {
  std::string name;
  dist::SchemeChoice scheme;
  dist::Wire wire;
  bool lowrank;
  dist::AllreduceAlgorithm algorithm = dist::AllreduceAlgorithm::ring;  // of the low-rank sums
};

void PrintTo(const Compression& c, std::ostream* os) { *os << c.name; }

dist::DistConfig config_of(const Compression& c) {
  dist::DistConfig config;
  config.scheme = c.scheme;
  config.wire = c.wire;
  config.lowrank = c.lowrank;
  config.lowrank_rank = kRank;
  config.collective.allreduce = c.algorithm;
  config.block_bytes = 16 << 10;   // fc1.weight spans many blocks and every owner
  config.bucket_bytes = 16 << 10;  // several buckets, some cut into chunks of uneven sizes
  return config;
}

dist::CommPlan plan_of(Net& net, const Compression& c, int ranks) {
  if (!c.lowrank) return dist::plan_for_config(net, config_of(c), ranks);
  std::map<size_t, dist::Scheme> every_layer_lowrank;
  for (const dist::PlannedParam& p : dist::backward_order(net)) every_layer_lowrank[p.layer] = dist::Scheme::lowrank;
  return dist::plan_for_config(net, config_of(c), ranks, {}, &every_layer_lowrank);
}

std::vector<float> values_of(Net& net) {
  return {net.flat_values().data(), net.flat_values().data() + net.flat_values().numel()};
}

// The ring of dist/schemes/allreduce.h on one process: chunk c's sum starts at rank
// c and passes rank c + 1, c + 2, ..., each adding its own in fp32 to what
// the wire delivered; the last one also averages.
void simulate_ring(const std::vector<std::vector<float>>& grads, int64_t begin, int64_t count, dist::Wire wire,
                   float* out) {
  const int p = static_cast<int>(grads.size());
  auto wired = [&](float x) { return wire == dist::Wire::bf16 ? dist::bf16_rounded(x) : x; };
  int64_t at = 0;
  for (int c = 0; c < p; ++c) {
    const int64_t n = count / p + (c < count % p ? 1 : 0);
    for (int64_t i = at; i < at + n; ++i) {
      float acc = grads[c][begin + i];
      for (int j = 1; j < p; ++j) {
        const float own = grads[(c + j) % p][begin + i];
        acc = j < p - 1 ? own + wired(acc) : (own + wired(acc)) * (1.f / static_cast<float>(p));
      }
      out[i] = wired(acc);
    }
    at += n;
  }
}

// The whole run on one process: each rank's gradient from its own shard,
// then each plan group's exchange as its arithmetic.
std::vector<float> simulate_training(const Compression& c, int ranks) {
  Net net(lenet_config(), kPerRank);
  net.init_params(7);
  Solver solver(solver_config("sgd", kIterations));
  const dist::CommPlan plan = plan_of(net, c, ranks);
  struct BlockState {
    std::vector<float> state;
    int64_t steps = 0;
  };
  std::map<std::pair<size_t, size_t>, BlockState> blocks;     // by (group, block)
  std::map<size_t, std::vector<dist::LowRankState>> lowrank;  // by group: each rank's
  for (size_t u = 0; u < plan.groups.size(); ++u) {
    const dist::SyncGroup& g = plan.groups[u];
    if (g.scheme == dist::Scheme::ps)
      for (size_t b = 0; b < g.blocks.size(); ++b)
        blocks[{u, b}].state.assign(solver.state_names().size() * g.blocks[b].count, 0.f);
    if (g.scheme == dist::Scheme::lowrank) {
      const Param& w = *plan.params[g.params[0]].param;
      lowrank[u].assign(ranks, dist::initial_lowrank_state(w.name, w.shape[0], w.value.numel() / w.shape[0], kRank));
    }
  }
  KeepGradients sink;
  std::mt19937_64 rng(11);
  RunContext ctx{Phase::train, &rng, {}};
  const float* flat = net.flat_grads().data();
  std::vector<std::vector<float>> grads(ranks);
  for (int it = 0; it < kIterations; ++it) {
    for (int r = 0; r < ranks; ++r) {
      fill_examples(net, (it * ranks + r) * kPerRank);
      net.forward(ctx);
      net.backward(ctx, sink);
      grads[r].assign(flat, flat + net.flat_grads().numel());
    }
    solver.set_iteration(it);
    for (size_t u = 0; u < plan.groups.size(); ++u) {
      const dist::SyncGroup& g = plan.groups[u];
      if (g.scheme == dist::Scheme::allreduce) {
        simulate_ring(grads, g.begin, g.end - g.begin, g.wire, net.flat_grads().data() + g.begin);
        for (size_t i : g.params) solver.update(*plan.params[i].param);
      } else if (g.scheme == dist::Scheme::ps) {
        const dist::PlannedParam& p = plan.params[g.params[0]];
        for (size_t b = 0; b < g.blocks.size(); ++b) {
          const int64_t begin = p.offset + g.blocks[b].begin, n = g.blocks[b].count;
          std::vector<std::vector<float>> parts(ranks);
          std::vector<const float*> order;
          for (int r = 0; r < ranks; ++r) {
            parts[r].assign(grads[r].begin() + begin, grads[r].begin() + begin + n);
            if (g.wire == dist::Wire::bf16) dist::round_to_bf16(parts[r].data(), n);
            order.push_back(parts[r].data());
          }
          // As HostCompute::update_block: the sum in rank order, then the average.
          std::vector<float> sum(parts[0]);
          for (int r = 1; r < ranks; ++r)
            for (int64_t i = 0; i < n; ++i) sum[i] += parts[r][i];
          for (float& v : sum) v *= 1.f / static_cast<float>(ranks);
          BlockState& s = blocks.at({u, b});
          solver.update_block(p.param->value.data() + g.blocks[b].begin, sum.data(),
                              s.state.empty() ? nullptr : s.state.data(), n, p.param->lr_mult, p.param->decay_mult,
                              ++s.steps);
        }
      } else {
        std::vector<dist::LowRankState>& states = lowrank.at(u);
        const dist::PlannedParam& w = plan.params[g.params[0]];
        const int64_t rows = states[0].rows, cols = states[0].cols;
        // P and the other parameters' gradients, then Q: each a ring all-reduce (the mean).
        int64_t others = 0;
        for (size_t k = 1; k < g.params.size(); ++k) others += plan.params[g.params[k]].param->value.numel();
        std::vector<std::vector<float>> factors(ranks, std::vector<float>(rows * kRank + others)),
            q(ranks, std::vector<float>(cols * kRank));
        for (int r = 0; r < ranks; ++r) {
          dist::lowrank_project(states[r], grads[r].data() + w.offset, factors[r].data());
          float* at = factors[r].data() + rows * kRank;
          for (size_t k = 1; k < g.params.size(); ++k) {
            const dist::PlannedParam& other = plan.params[g.params[k]];
            at = std::copy(grads[r].begin() + other.offset,
                           grads[r].begin() + other.offset + other.param->value.numel(), at);
          }
        }
        std::vector<float> mean(rows * kRank + others);
        simulate_ring(factors, 0, static_cast<int64_t>(mean.size()), dist::Wire::fp32, mean.data());
        std::vector<float> p(mean.begin(), mean.begin() + rows * kRank);
        dist::orthogonalise_columns(p.data(), rows, kRank);
        const float* at = mean.data() + rows * kRank;
        for (size_t k = 1; k < g.params.size(); ++k) {
          Param& other = *plan.params[g.params[k]].param;
          std::copy(at, at + other.value.numel(), other.grad.data());
          at += other.value.numel();
        }
        for (int r = 0; r < ranks; ++r) dist::lowrank_back_project(states[r], p.data(), q[r].data());
        std::vector<float> mean_q(cols * kRank);
        simulate_ring(q, 0, cols * kRank, dist::Wire::fp32, mean_q.data());
        for (int r = 0; r < ranks; ++r) {
          states[r].q = mean_q;
          dist::lowrank_decompress(states[r], p.data(), w.param->grad.data());
        }
        for (size_t i : g.params) solver.update(*plan.params[i].param);
      }
    }
  }
  return values_of(net);
}

struct DistResult {
  std::vector<float> values;
  std::vector<uint64_t> hashes;
  dist::CommStats stats;
};

// Iterations [first, last) of training `net` with `solver` on every rank;
// with `checkpoint`, rank 0 writes one there at the end.
DistResult train_distributed(const Compression& c, Net& net, Solver& solver, int first = 0, int last = kIterations,
                             std::map<std::string, DeferredTensor> compression_state = {},
                             const std::string& checkpoint = "") {
  const dist::World& world = test_world();
  dist::SchedulerOptions options;
  options.config = config_of(c);
  options.first_iteration = first;
  options.compression_state = std::move(compression_state);
  dist::Scheduler scheduler(net, solver, world, plan_of(net, c, world.size()), std::move(options));
  std::mt19937_64 rng(11);
  RunContext ctx{Phase::train, &rng, {}};
  for (int it = first; it < last; ++it) {
    fill_examples(net, (it * world.size() + world.rank()) * kPerRank);
    net.forward(ctx, &scheduler);
    net.backward(ctx, scheduler);
  }
  scheduler.sync();
  DistResult out;
  out.stats = scheduler.take_stats();
  out.values = values_of(net);
  if (!checkpoint.empty()) {
    const Solver snapshot = scheduler.solver_snapshot();
    scheduler.save_with_compression_state([&](const std::vector<StreamedTensor>& compression) {
      save_checkpoint(checkpoint, net, &snapshot, {}, compression);
    });
  }
  const uint64_t mine = hash_of(out.values);
  out.hashes.resize(world.size());
  scheduler.run([&](const dist::Comm& comm) {
    POSEIDON_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, out.hashes.data(), 1, MPI_UINT64_T, comm.handle()));
  });
  return out;
}

DistResult train_distributed(const Compression& c) {
  Net net(lenet_config(), kPerRank);
  net.init_params(7);
  Solver solver(solver_config("sgd", kIterations));
  return train_distributed(c, net, solver);
}

TEST(LowRankCheckpoint, ResumesBitForBit) {
  if (test_world().size() < 2) GTEST_SKIP() << "needs several ranks";
  const Compression lowrank{"lowrank", dist::SchemeChoice::hybrid, dist::Wire::fp32, true};
  const DistResult straight = train_distributed(lowrank);
  const std::string path = shared_path("lowrank_checkpoint");
  {
    Net net(lenet_config(), kPerRank);
    net.init_params(7);
    Solver solver(solver_config("sgd", kIterations));
    train_distributed(lowrank, net, solver, 0, kIterations / 2, {}, path);
  }
  POSEIDON_MPI(MPI_Barrier(MPI_COMM_WORLD));  // the file is written
  auto resume = [&](bool with_state) {
    Net net(lenet_config(), kPerRank);
    Solver solver(solver_config("sgd", kIterations));
    std::map<std::string, DeferredTensor> state;
    load_checkpoint(path, net, &solver, &state);
    if (!with_state) state.clear();
    return train_distributed(lowrank, net, solver, kIterations / 2, kIterations, state);
  };
  const DistResult resumed = resume(true);
  const DistResult without_state = resume(false);
  POSEIDON_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (test_world().rank() == 0) std::filesystem::remove(path);
  EXPECT_EQ(hash_of(resumed.values), hash_of(straight.values)) << "the resumed run differs from the straight one";
  // Q and the error memory matter: resumed without them, the run differs.
  EXPECT_NE(hash_of(without_state.values), hash_of(straight.values));
}

// Low-rank factors summed by halving-doubling, as a plan at scale chooses:
// replicas stay bitwise identical, training happens, and the exchange runs
// that algorithm's schedule (at 3 ranks its extra rank hands over whole
// factors, so the bytes differ from a ring's).
TEST(LowRankAlgorithm, HalvingDoublingKeepsReplicasIdentical) {
  const int ranks = test_world().size();
  if (ranks < 2) GTEST_SKIP() << "needs several ranks";
  const Compression ring{"lowrank", dist::SchemeChoice::hybrid, dist::Wire::fp32, true};
  Compression halving = ring;
  halving.algorithm = dist::AllreduceAlgorithm::halving_doubling;
  Net net(lenet_config(), kPerRank);
  for (const dist::SyncGroup& g : plan_of(net, halving, ranks).groups)
    EXPECT_EQ(g.algorithm, dist::AllreduceAlgorithm::halving_doubling) << g.label;
  const DistResult run = train_distributed(halving);
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(run.hashes[r], run.hashes[0]) << "rank " << r << " differs from rank 0";
  Net fresh(lenet_config(), 1);
  fresh.init_params(7);
  EXPECT_NE(hash_of(run.values), hash_of(values_of(fresh)));
  if ((ranks & (ranks - 1)) != 0)
    EXPECT_NE(run.stats.bytes_sent, train_distributed(ring).stats.bytes_sent) << "the ring's schedule ran";
}

class Compressed : public ::testing::TestWithParam<Compression> {};

TEST_P(Compressed, IdenticalOnEveryRankAndEqualToItsSimulation) {
  const int ranks = test_world().size();
  if (ranks < 2) GTEST_SKIP() << "needs several ranks";
  const DistResult run = train_distributed(GetParam());
  const std::vector<float> simulated = simulate_training(GetParam(), ranks);
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(run.hashes[r], run.hashes[0]) << "rank " << r << " differs from rank 0";
  ASSERT_EQ(run.values.size(), simulated.size());
  int64_t differing = 0;
  for (size_t i = 0; i < simulated.size(); ++i)
    if (std::memcmp(&run.values[i], &simulated[i], 4) != 0) ++differing;
  EXPECT_EQ(differing, 0) << "of " << simulated.size() << " parameters differ from the simulation";
  // The parameters moved: training happened.
  Net fresh(lenet_config(), 1);
  fresh.init_params(7);
  EXPECT_NE(hash_of(run.values), hash_of(values_of(fresh)));
}

TEST_P(Compressed, MovesFewerBytesThanFp32) {
  const int ranks = test_world().size();
  if (ranks < 2) GTEST_SKIP() << "needs several ranks";
  Compression plain = GetParam();
  plain.wire = dist::Wire::fp32;
  plain.lowrank = false;
  const DistResult compressed = train_distributed(GetParam());
  const DistResult uncompressed = train_distributed(plain);
  EXPECT_LT(compressed.stats.bytes_sent, uncompressed.stats.bytes_sent);
  EXPECT_LT(compressed.stats.bytes_received, uncompressed.stats.bytes_received);
}

INSTANTIATE_TEST_SUITE_P(Schemes, Compressed,
                         ::testing::Values(Compression{"ps_bf16", dist::SchemeChoice::ps, dist::Wire::bf16, false},
                                           Compression{"allreduce_bf16", dist::SchemeChoice::allreduce,
                                                       dist::Wire::bf16, false},
                                           Compression{"lowrank", dist::SchemeChoice::hybrid, dist::Wire::fp32, true}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace poseidon::testing
