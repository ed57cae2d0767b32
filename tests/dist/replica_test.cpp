// Acceptance of the schemes: LeNet, and VGG19-22K at reduced width and input
// size (He-initialised, so that gradients rather than weight decay move its
// deep convolutions), trained 20 iterations on P ranks with K examples each
// of a data set they learn from. Every iteration is checked in lockstep,
// against references computed on every rank from the distributed run's own
// state before it (parameters and the full optimizer state, PS shards
// gathered to each rank in turn):
// - what the exchange computes, bit for bit: for PS and all-reduce
//   parameters the ranks' gradients summed in the exchange's order (a PS
//   owner in rank order; a ring from each chunk's rank round), averaged and
//   applied, so a changed summation order fails at P >= 3; for SFB
//   parameters the gradient rebuilt from the ranks' factors in rank order by
//   the exchange's GEMM call, and applied. The value and the solver state
//   after must equal it exactly;
// - one process on the combined batch of P*K: each gradient, solver state
//   and (under SGD) update within 1e-4 (relative L2 per tensor: the order
//   of the sums over the batch differs, and so may the kernel forming an fc
//   weight gradient; Adam's and RMSprop's updates magnify that where a sum
//   nearly cancels); each gradient at least twice its weight decay; LeNet's
//   loss falls under SGD.
// Parameters end bitwise identical on every rank. The "offload" cases hand
// the all-reduce sums and SFB's rebuild GEMMs to stand-ins of a GPU's
// (a dist::DeviceTransport: a reduce to rank 0 and a broadcast, as NCCL gives
// every rank the same sum, and the host's gemm), which must change nothing
// but who computes (their sums' order is MPI's: within 1e-4). The
// halving-doubling and two-level cases sum each element by a tree, not
// round the ranks: within 1e-4 of the rank-order sum, replicas still bitwise
// identical (their exact order: tests/dist/allreduce_schedule_test.cpp). Adam, AdamW and
// RMSprop cases check their sharded state (moments and step counts) the same
// way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "core/local_sink.h"
#include "core/math.h"
#include "core/precision.h"
#include "dist/session/scheduler.h"
#include "tests/dist/test_world.h"

namespace poseidon::testing {
namespace {

constexpr int64_t kPerRank = 4;
constexpr int kIterations = 20;

// "lenet", or "vgg": vgg19_22k's 16 convolutions, 5 pools and 3 FC layers at
// 32x32, 8 to 16 channels, FC widths 32 and 10 classes, without dropout; its
// convolutions He-initialised (with PyTorch's default the deep stack's
// gradients vanish and weight decay alone moves them).
ConfigNode model_config(const std::string& model) {
  if (model == "lenet") return ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  ConfigNode vgg = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/vgg19_22k.yaml");
  vgg.apply_overrides({"vars.size=32", "vars.num_classes=10", "vars.dropout=0", "vars.width=8", "vars.hidden=32",
                       "layers.1.out=8", "layers.2.out=16", "layers.3.out=16", "layers.4.out=16",
                       "blocks.conv_relu.layers.0.weight_init={type: msra}",
                       "layers.6.weight_init={type: msra}", "layers.9.weight_init={type: msra}"});
  return vgg;
}

SolverConfig solver_config(const std::string& type) {
  SolverConfig c;
  c.type = type;
  c.momentum = type == "sgd" ? 0.9 : 0.0;
  c.weight_decay = 5e-4;
  c.lr.base_lr = type == "sgd" ? 0.05 : 0.001;
  c.lr.policy = "cosine";
  c.lr.max_iter = kIterations;
  c.max_iter = kIterations;
  return c;
}

// Example `e` of an endless synthetic set: label e mod 10, and an image that
// is bright in its class's band of rows, dark elsewhere, plus seeded noise:
// easy enough that the nets learn within the run, so their gradients carry
// the data and not noise or weight decay.
void fill_examples(Net& net, int64_t first) {
  Tensor& data = net.blob("data").value;
  Tensor& label = net.blob("label").value;
  const int64_t height = data.dim(2), width = data.dim(3), per = data.numel() / data.dim(0);
  for (int64_t k = 0; k < data.dim(0); ++k) {
    const int64_t e = first + k, cls = e % 10;
    std::mt19937 noise(static_cast<uint32_t>(1000 + e));
    std::uniform_real_distribution<float> unit(-0.5f, 0.5f);
    for (int64_t i = 0; i < per; ++i) {
      const int64_t band = (i / width % height) * 10 / height;
      data[k * per + i] = (band == cls ? 1.f : -0.25f) + 0.5f * unit(noise);
    }
    label[k] = static_cast<float>(cls);
  }
}

// One parameter's optimizer state: its slots packed as Solver::state_shape
// says (empty without state), and its step count.
struct ParamState {
  std::vector<float> slots;
  int64_t steps = 0;
  bool operator==(const ParamState&) const = default;
};
using State = std::map<std::string, ParamState>;

std::vector<float> values_of(Net& net) {
  return {net.flat_values().data(), net.flat_values().data() + net.flat_values().numel()};
}

State state_of(const Solver& solver) {
  State state;
  for (const auto& [name, buf] : solver.state()) state[name].slots.assign(buf.data(), buf.data() + buf.numel());
  for (const auto& [name, steps] : solver.steps()) state[name].steps = steps;
  return state;
}

void set_state(Solver& solver, const State& state, Net& net) {
  solver.state().clear();
  solver.steps().clear();
  for (const auto& [name, s] : state) {
    if (!s.slots.empty()) {
      Tensor t(solver.state_shape(net.find_param(name)->shape));
      std::copy(s.slots.begin(), s.slots.end(), t.data());
      solver.state()[name] = t;
    }
    if (solver.counts_steps()) solver.steps()[name] = s.steps;
  }
}

void set_values(Net& net, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), net.flat_values().data());
}

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

// The device transport's stand-in: each bucket (by its first element) summed
// by start_sum on a communicator of its own.
class StandInSums : public dist::DeviceTransport {
 public:
  explicit StandInSums(int& calls) : calls_(calls) {}
  void add(int64_t begin, dist::Comm comm) { comms_[begin] = std::make_unique<dist::Comm>(std::move(comm)); }
  void sum_to_host(dist::InFlight& in_flight, int64_t begin, int64_t count, float* host, dist::Exchange& owner,
                   int slot) override {
    ++calls_;
    in_flight.post_polled(start_sum(*comms_.at(begin), host, count), owner, slot);
  }

 private:
  int& calls_;
  std::map<int64_t, std::unique_ptr<dist::Comm>> comms_;
};

uint64_t hash_of(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

double relative_l2(const float* a, const float* b, int64_t n) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

double l2(const float* a, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(a[i]) * a[i];
  return std::sqrt(sum);
}

struct Case {
  std::string model;
  std::string scheme;
  bool wfbp;
  std::string order = "backward";
  bool offload = false;
  std::string solver = "sgd";
  // Collectives at scale: the all-reduce algorithm, and PS blocks spread over every rank.
  std::string algorithm = "ring";
  bool spread_blocks = false;
};

// The references of one iteration, computed on every rank from the
// distributed run's state before it.
class Lockstep {
 public:
  Lockstep(const std::string& model, int ranks, const std::string& solver)
      : ranks_(ranks), solver_type_(solver), combined_(model_config(model), kPerRank * ranks),
        local_(model_config(model), kPerRank), solver_(solver_config(solver)) {}

  // One process on the combined batch from `before` and `state`: its loss
  // and gradients there, and its parameters and state after the update.
  void train_combined(int it, const std::vector<float>& before, const State& state) {
    set_values(combined_, before);
    set_state(solver_, state, combined_);
    solver_.set_iteration(it);
    fill_examples(combined_, int64_t(it) * ranks_ * kPerRank);
    LocalGradSink sink(solver_);
    std::mt19937_64 rng(11);  // dropout layers need one even at ratio 0
    RunContext ctx{Phase::train, &rng, {}};
    loss = combined_.forward(ctx);
    combined_.backward(ctx, sink);
    grads.assign(combined_.flat_grads().data(), combined_.flat_grads().data() + combined_.flat_grads().numel());
    after = values_of(combined_);
    state_after = state_of(solver_);
  }

  // What data parallelism computes for one parameter from `before` and
  // `state`: the ranks' gradients summed, element i in rank order from rank
  // first[i] round (0 for a PS owner; an all-reduce ring starts each chunk's
  // sum at the rank of the chunk's index), averaged, and the solver's step on
  // it applied to each of `blocks` (a PS parameter's, else the whole) with the
  // blocks' state slot after slot. Its value and state after: bit for bit
  // what the exchange computes; and the gradient the step applied.
  struct Step {
    std::vector<float> value;
    ParamState state;
    std::vector<float> grad;
  };
  Step rank_sum_step(int it, const dist::PlannedParam& planned, const std::vector<int>& first,
                     const std::vector<dist::PsBlock>& blocks, const std::vector<float>& before, const State& state) {
    const int64_t n = planned.param->value.numel();
    std::vector<float> sum(n);
    for (int64_t i = 0; i < n; ++i)
      for (int k = 0; k < ranks_; ++k) {
        const float g = local_gradients(it, (first[i] + k) % ranks_, before)[planned.offset + i];
        sum[i] = k == 0 ? g : sum[i] + g;
      }
    const float scale = 1.f / static_cast<float>(ranks_);
    for (float& x : sum) x *= scale;
    return solver_step(it, planned, sum, blocks, before, state);
  }

  // What sufficient-factor broadcasting computes for an fc layer's weight
  // (or bias): the ranks' factors, the layer's input and output gradient
  // after backward, stacked in rank order; the gradient rebuilt from them by
  // the exchange's own arithmetic (dW = U^T V / P by the same gemm call, db
  // = U's column sums in row order / P); the solver's step on it. Its value
  // and state after: bit for bit what the exchange computes, whichever kernel
  // the single process forms its weight gradient with.
  Step sfb_step(int it, const dist::PlannedParam& planned, bool bias, const std::vector<float>& before,
                const State& state) {
    const auto& [u, v] = sfb_factors(it, planned.layer, before);
    const int64_t rows = ranks_ * kPerRank, m = static_cast<int64_t>(u.size()) / rows;
    const int64_t n = static_cast<int64_t>(v.size()) / rows;
    const float scale = 1.f / static_cast<float>(ranks_);
    std::vector<float> grad(planned.param->value.numel(), 0.f);
    if (!bias) {
      gemm(true, false, m, n, rows, scale, u.data(), v.data(), 0.f, grad.data());
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < m; ++o) grad[o] += u[r * m + o];
      for (float& g : grad) g *= scale;
    }
    return solver_step(it, planned, grad, {dist::PsBlock{0, planned.param->value.numel(), 0, 0}}, before, state);
  }

  float loss = 0;
  std::vector<float> grads, after;
  State state_after;

 private:
  // The solver's step on `grad` applied to each of `blocks` with the blocks'
  // state slot after slot, from `before` and `state`.
  Step solver_step(int it, const dist::PlannedParam& planned, const std::vector<float>& grad,
                   const std::vector<dist::PsBlock>& blocks, const std::vector<float>& before, const State& state) {
    const int64_t n = planned.param->value.numel();
    Solver solver(solver_config(solver_type_));
    solver.set_iteration(it);
    const size_t slots = solver.keeps_state() ? solver.state_names().size() : 0;
    Step step{{before.begin() + planned.offset, before.begin() + planned.offset + n}, {}, grad};
    auto known = state.find(planned.param->name);
    if (known != state.end()) step.state = known->second;
    if (step.state.slots.empty()) step.state.slots.assign(slots * n, 0.f);
    step.state.steps += solver.counts_steps() ? 1 : 0;
    std::vector<float> packed;
    for (const dist::PsBlock& b : blocks) {
      packed.resize(slots * b.count);
      for (size_t s = 0; s < slots; ++s)
        std::copy_n(step.state.slots.begin() + s * n + b.begin, b.count, packed.begin() + s * b.count);
      solver.update_block(step.value.data() + b.begin, grad.data() + b.begin, slots ? packed.data() : nullptr, b.count,
                          planned.param->lr_mult, planned.param->decay_mult, step.state.steps);
      for (size_t s = 0; s < slots; ++s)
        std::copy_n(packed.begin() + s * b.count, b.count, step.state.slots.begin() + s * n + b.begin);
    }
    return step;
  }

  // The factors of layer `layer` in iteration `it` at `before` (each layer's
  // once, for its weight and its bias): its output gradient U [P*K, M] and
  // input V [P*K, N] after each rank's backward, stacked in rank order,
  // rounded to bfloat16 for a bf16 layer as the exchange captures them.
  using Factors = std::pair<std::vector<float>, std::vector<float>>;
  const Factors& sfb_factors(int it, size_t layer_index, const std::vector<float>& before) {
    if (factors_it_ != it) factors_.clear(), factors_it_ = it;
    Factors& f = factors_[layer_index];
    if (!f.first.empty()) return f;
    auto& [u, v] = f;
    for (int r = 0; r < ranks_; ++r) {
      run_local(it, r, before);
      const Layer& layer = local_.layer(layer_index);
      // Widened: under bf16 the fc's blobs are bfloat16 (core/blob_types.h).
      const Tensor x = local_.blob(layer.inputs()[0]).value.to(DType::f32);
      const Tensor dy = local_.blob(layer.outputs()[0]).grad.to(DType::f32);
      u.insert(u.end(), dy.data(), dy.data() + dy.numel());
      v.insert(v.end(), x.data(), x.data() + x.numel());
      if (layer.precision() == Precision::bf16) {
        round_to_bf16(u.data() + u.size() - dy.numel(), dy.numel());
        round_to_bf16(v.data() + v.size() - x.numel(), x.numel());
      }
    }
    return f;
  }

  // Rank r's forward and backward in iteration `it` at `before`.
  void run_local(int it, int r, const std::vector<float>& before) {
    set_values(local_, before);
    fill_examples(local_, (int64_t(it) * ranks_ + r) * kPerRank);
    Solver unused(solver_config(solver_type_));
    LocalGradSink held(unused, true);
    std::mt19937_64 rng(11);
    RunContext ctx{Phase::train, &rng, {}};
    local_.forward(ctx);
    local_.backward(ctx, held);
  }

  // Rank r's gradients in iteration `it` at `before` (each computed once).
  const std::vector<float>& local_gradients(int it, int r, const std::vector<float>& before) {
    if (local_it_ != it) local_grads_.clear(), local_it_ = it;
    std::vector<float>& g = local_grads_[r];
    if (!g.empty()) return g;
    run_local(it, r, before);
    g.assign(local_.flat_grads().data(), local_.flat_grads().data() + local_.flat_grads().numel());
    return g;
  }

  int ranks_;
  std::string solver_type_;
  Net combined_, local_;
  Solver solver_;
  int local_it_ = -1, factors_it_ = -1;
  std::map<int, std::vector<float>> local_grads_;
  std::map<size_t, Factors> factors_;
};

struct DistRun {
  std::vector<uint64_t> hashes;  // of every rank's final parameters
  dist::CommStats stats;
  int device_sums = 0, device_rebuilds = 0;  // calls of the offload's stand-ins
  std::vector<float> losses;                 // the combined reference's, per iteration
  int exact_checks = 0;  // updates checked bit for bit
};

// The full optimizer state as this rank holds it: its own (all-reduce and
// SFB parameters) and the owners' PS shards, gathered here.
State full_state(dist::Scheduler& scheduler) {
  State mine;
  for (int root = 0; root < scheduler.size(); ++root) {
    Solver snapshot = scheduler.solver_snapshot(root);
    if (root == scheduler.rank()) mine = state_of(snapshot);
  }
  return mine;
}

DistRun train_distributed(const std::string& model, const dist::DistConfig& config, bool offload,
                          const std::string& solver_type) {
  const dist::World& world = test_world();
  Net net(model_config(model), kPerRank);
  net.init_params(7);
  Solver solver(solver_config(solver_type));
  DistRun run;
  dist::CommPlan plan = dist::plan_for_config(net, config, world.size());
  // The stand-in's collectives, a communicator per bucket (as NCCL's calls,
  // they start in the same order everywhere, but a bucket's broadcast
  // follows its reduce whenever that ends, so buckets must not share one).
  const dist::Comm base(world);
  StandInSums sums(run.device_sums);
  dist::SchedulerOptions options;
  options.config = config;
  if (offload) {
    for (const dist::SyncGroup& group : plan.groups)
      if (group.scheme == dist::Scheme::allreduce) sums.add(group.begin, base.duplicate());
    options.device_sums = &sums;
    options.rebuild_gemm = [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                               const float* b, float beta, float* c) {
      ++run.device_rebuilds;
      gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
    };
  }
  dist::Scheduler scheduler(net, solver, world, std::move(plan), std::move(options));
  Lockstep reference(model, world.size(), solver_type);
  std::mt19937_64 rng(11);  // dropout layers need one even at ratio 0
  RunContext ctx{Phase::train, &rng, {}};
  const std::string where = "rank " + std::to_string(world.rank()) + ", iteration ";
  for (int it = 0; it < kIterations; ++it) {
    const State state_before = full_state(scheduler);  // syncs: the iteration before is complete
    const std::vector<float> before = values_of(net);
    fill_examples(net, (it * world.size() + world.rank()) * kPerRank);
    net.forward(ctx, &scheduler);
    net.backward(ctx, scheduler);
    const State state_after = full_state(scheduler);
    const std::vector<float> after = values_of(net);

    reference.train_combined(it, before, state_before);
    run.losses.push_back(reference.loss);
    const dist::CommPlan& plan = scheduler.plan();
    for (const dist::SyncGroup& group : plan.groups) {
      for (size_t k : group.params) {
        const dist::PlannedParam& p = plan.params[k];
        const int64_t n = p.param->value.numel(), at = p.offset;
        const std::string name = where + std::to_string(it) + ": " + p.param->name;
        // Where each element's sum starts, and the update's blocks.
        std::vector<int> first(n, 0);
        std::vector<dist::PsBlock> blocks = group.blocks;
        if (group.scheme != dist::Scheme::ps) blocks = {dist::PsBlock{0, n, 0, 0}};
        if (group.scheme == dist::Scheme::allreduce) {
          const int64_t count = group.end - group.begin, ranks = world.size();
          for (int64_t i = 0; i < n; ++i) {
            const int64_t j = at + i - group.begin;  // in the bucket, cut into chunks of count / P (+1 for the first)
            const int64_t big = count / ranks + 1, bigs = count % ranks;
            first[i] = static_cast<int>(j < bigs * big ? j / big : bigs + (j - bigs * big) / (count / ranks));
          }
        }
        const Lockstep::Step step = group.scheme == dist::Scheme::sfb
                                        ? reference.sfb_step(it, p, k != group.params[0], before, state_before)
                                        : reference.rank_sum_step(it, p, first, blocks, before, state_before);
        std::vector<float> update(n), combined(n);
        for (int64_t i = 0; i < n; ++i) {
          update[i] = after[at + i] - before[at + i];
          combined[i] = reference.after[at + i] - before[at + i];
        }
        if (!state_after.count(p.param->name) && !step.state.slots.empty()) {
          ADD_FAILURE() << name << ": solver state missing";
          continue;
        }
        const ParamState& state = state_after.count(p.param->name) ? state_after.at(p.param->name) : ParamState{};
        const ParamState& combined_state = reference.state_after[p.param->name];
        const int64_t slots = static_cast<int64_t>(state.slots.size());
        if (group.scheme == dist::Scheme::allreduce && (offload || group.algorithm != dist::AllreduceAlgorithm::ring)) {
          // Summed by the offload's stand-in (MPI_Reduce), in an order of MPI's, or by a tree.
          std::vector<float> rank_sum(n);
          for (int64_t i = 0; i < n; ++i) rank_sum[i] = step.value[i] - before[at + i];
          EXPECT_LE(relative_l2(update.data(), rank_sum.data(), n), 1e-4) << name << ": update";
        } else {
          EXPECT_TRUE(std::equal(step.value.begin(), step.value.end(), after.begin() + at))
              << name << ": not the exchange's sum of the ranks' gradients, in its order, applied";
          EXPECT_TRUE(state == step.state) << name << ": solver state or step count";
          ++run.exact_checks;
        }
        // One process on the combined batch differs only by the order of its
        // sums: in the gradient, and for SGD in the update. Adam's and
        // RMSprop's steps divide each gradient by its own magnitude, so an
        // element whose sum nearly cancels (with weight decay, too) moves by
        // a share of lr that the order of the sums decides; their update is
        // the exchange's sum applied, bit for bit, above.
        EXPECT_LE(relative_l2(step.grad.data(), reference.grads.data() + at, n), 1e-4)
            << name << ": gradient vs the combined batch";
        if (solver_type == "sgd")
          EXPECT_LE(relative_l2(update.data(), combined.data(), n), 1e-4) << name << ": update vs the combined batch";
        EXPECT_LE(relative_l2(state.slots.data(), combined_state.slots.data(), slots), 1e-4)
            << name << ": solver state vs the combined batch";
        EXPECT_EQ(state.steps, combined_state.steps) << name << ": step count";
        EXPECT_GT(l2(reference.grads.data() + at, n), 2 * solver.config().weight_decay * l2(before.data() + at, n))
            << name << ": weight decay, not its gradient, moves it";
      }
    }
  }
  run.stats = scheduler.take_stats();
  const uint64_t mine = hash_of(values_of(net));
  run.hashes.resize(world.size());
  scheduler.run([&](const dist::Comm& c) {
    POSEIDON_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, run.hashes.data(), 1, MPI_UINT64_T, c.handle()));
  });
  return run;
}

class Replicas : public ::testing::TestWithParam<Case> {};

TEST_P(Replicas, EachUpdateMatchesTheCombinedBatchAndTheOwnersSum) {
  dist::DistConfig config;
  config.scheme = dist::parse_scheme_choice(GetParam().scheme);
  config.wfbp = GetParam().wfbp;
  config.order = dist::parse_send_order(GetParam().order);
  config.block_bytes = 64 << 10;   // lenet's fc1.weight spans many blocks and every owner
  config.bucket_bytes = 64 << 10;  // several buckets
  config.collective.allreduce = dist::parse_algorithm(GetParam().algorithm);
  config.collective.spread_blocks = GetParam().spread_blocks;
  // two_level: hosts of 2 emulated where they divide the ranks, else the ranks MPI finds on this host.
  if (GetParam().algorithm == "two_level") config.collective.ranks_per_host = test_world().size() % 2 == 0 ? 2 : 1;
  DistRun run = train_distributed(GetParam().model, config, GetParam().offload, GetParam().solver);

  for (size_t r = 1; r < run.hashes.size(); ++r)
    EXPECT_EQ(run.hashes[r], run.hashes[0]) << "rank " << r << "'s parameters differ from rank 0's";
  // LeNet learns within the run (VGG's 16 convolutions need more than 20
  // iterations; that gradients, not weight decay, move each of its tensors
  // is checked at every iteration).
  ASSERT_EQ(run.losses.size(), static_cast<size_t>(kIterations));
  if (GetParam().model == "lenet" && GetParam().solver == "sgd") {
    EXPECT_LT(run.losses.back(), 0.8f * run.losses.front());
  }
  const std::string& scheme = GetParam().scheme;
  if (scheme != "allreduce" || (!GetParam().offload && GetParam().algorithm == "ring")) {
    EXPECT_GT(run.exact_checks, 0);
  }
  EXPECT_EQ(run.stats.iterations, kIterations);
  const bool summed_elsewhere = GetParam().offload && scheme == "allreduce";
  if (test_world().size() > 1) {
    // MPI moves the bytes the scheduler counts, unless the sums went elsewhere.
    if (summed_elsewhere) {
      EXPECT_GT(run.device_sums, 0);
    } else {
      EXPECT_GT(run.stats.bytes_sent, 0);
    }
  }
  if (GetParam().offload && scheme == "sfb") {
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
  for (const char* model : {"lenet", "vgg"})
    for (const char* algorithm : {"halving_doubling", "two_level"})
      for (bool wfbp : {true, false}) {
        Case c{model, "allreduce", wfbp};
        c.algorithm = algorithm;
        out.push_back(c);
      }
  for (Case c : {Case{"lenet", "ps", true}, Case{"lenet", "hybrid", true, "priority"}}) {
    c.spread_blocks = true;
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
         (info.param.solver == "sgd" ? "" : "_" + info.param.solver) +
         (info.param.algorithm == "ring" ? "" : "_" + info.param.algorithm) + (info.param.spread_blocks ? "_spread" : "");
});

}  // namespace
}  // namespace poseidon::testing
