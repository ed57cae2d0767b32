// The many-parameter update's walk (core/update_groups.h), on the host as
// the GPU kernel runs it: 40 parameters of assorted sizes (empty ones
// included, first and last too) in one table, walked by any number of
// threads, must get, bit for bit, the per-element update each would get
// alone, in every rule and with its state slots where the per-parameter
// update puts them; with the finite guard's flag set, nothing changes. The
// Solver's table of a step, so walked, gives what its own update gives.
// CudaSolver.UpdateAllMatchesTheCpu and CudaUpdateTable.* (tests/core/
// cuda_test.cpp) run the kernel itself against the CPU.
#include "core/update_groups.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/config_node.h"
#include "core/solver.h"

namespace poseidon {
namespace {

struct Owned {
  std::vector<float> value, grad, state;
};

// Equal bit for bit (empty vectors included, whose data() may be null).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

UpdateStep step_for(UpdateRule rule, int k) {
  UpdateStep s;
  s.rule = rule;
  s.lr = 0.01f * float(1 + k % 3);
  s.decay = k % 2 ? 1e-3f : 0.f;
  s.momentum = rule == UpdateRule::adam ? 0.f : 0.9f;
  s.nesterov = k % 4 == 1;
  s.beta1 = 0.9f, s.one_minus_beta1 = 0.1f, s.beta2 = 0.999f, s.one_minus_beta2 = 0.001f;
  s.bias_correction2_sqrt = 0.05f;
  s.shrink = k % 5 == 0 ? 0.999f : 1.f;
  s.alpha = 0.99f, s.one_minus_alpha = 0.01f;
  s.eps = 1e-8f;
  s.centered = k % 3 == 0;
  return s;
}

// Parameter k's size: empty for the first, the last and some between.
int64_t size_of(int k) { return k == 0 || k == 39 || k % 9 == 4 ? 0 : (k * 37) % 101 + 1; }

TEST(UpdateTable, FindsTheSliceOfEveryElementPassingOverEmptyOnes) {
  std::vector<UpdateSlice> table;
  for (int k = 0; k < 40; ++k) add_update_slice(table, UpdateStep{}, nullptr, nullptr, nullptr, size_of(k));
  const int count = int(table.size());
  int64_t t = 0;
  for (int k = 0; k < 40; ++k)
    for (int64_t i = 0; i < size_of(k); ++i, ++t) ASSERT_EQ(find_update_slice(table.data(), count, t), k) << t;
  EXPECT_EQ(update_total(table.data(), count), t);
}

TEST(UpdateTable, WalkGivesEachParameterItsOwnUpdate) {
  for (UpdateRule rule : {UpdateRule::sgd, UpdateRule::adam, UpdateRule::rmsprop})
    for (int64_t threads : {1, 7, 256, 100000}) {
      std::mt19937_64 rng(5);
      std::uniform_real_distribution<float> uni(-1.f, 1.f);
      std::vector<Owned> walked(40), alone;
      std::vector<UpdateStep> steps;
      for (int k = 0; k < 40; ++k) {
        const int64_t n = size_of(k);
        Owned& o = walked[k];
        for (int64_t i = 0; i < n; ++i) o.value.push_back(uni(rng)), o.grad.push_back(uni(rng));
        for (int64_t i = 0; i < 3 * n; ++i) o.state.push_back(std::abs(uni(rng)));
        steps.push_back(step_for(rule, k));
      }
      alone = walked;
      std::vector<UpdateSlice> table;
      for (int k = 0; k < 40; ++k)
        add_update_slice(table, steps[k], walked[k].value.data(), walked[k].grad.data(), walked[k].state.data(),
                         int64_t(walked[k].value.size()));
      const std::vector<Owned> before = walked;
      const float raised = 1.f, lowered = 0.f;
      apply_update_table(table.data(), int(table.size()), &raised, threads);
      for (int k = 0; k < 40; ++k) {
        ASSERT_TRUE(same_bits(before[k].value, walked[k].value)) << "flag set, parameter " << k;
        ASSERT_TRUE(same_bits(before[k].state, walked[k].state)) << "flag set, parameter " << k << " state";
      }
      apply_update_table(table.data(), int(table.size()), threads % 2 ? &lowered : nullptr, threads);
      for (int k = 0; k < 40; ++k) {
        Owned& o = alone[k];
        const UpdateStep& s = steps[k];
        const int64_t n = int64_t(o.value.size());
        float* st = o.state.data();
        for (int64_t i = 0; i < n; ++i) {
          if (rule == UpdateRule::sgd) sgd_element(s, o.value.data(), o.grad.data(), st, i);
          if (rule == UpdateRule::adam) adam_element(s, o.value.data(), o.grad.data(), st, st + n, i);
          if (rule == UpdateRule::rmsprop) {
            float *buf, *avg;
            rmsprop_slots(s, st, n, &buf, &avg);
            rmsprop_element(s, o.value.data(), o.grad.data(), st, buf, avg, i);
          }
        }
        ASSERT_TRUE(same_bits(o.value, walked[k].value))
            << "rule " << int(rule) << ", " << threads << " threads, parameter " << k;
        ASSERT_TRUE(same_bits(o.state, walked[k].state))
            << "rule " << int(rule) << ", " << threads << " threads, parameter " << k << " state";
      }
    }
}

}  // namespace
}  // namespace poseidon

namespace poseidon {
namespace {

// Solver::update_table, the host's part of the one-launch GPU update (the
// numbers of each parameter's step, its step count, its state), walked on
// the host, against Solver::update of each parameter, bit for bit, over
// steps whose learning rate changes, with multipliers, a frozen parameter
// and an empty one.
TEST(UpdateTable, SolverTableWalkedEqualsTheSolversUpdate) {
  for (const char* config :
       {"{lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01, lr_policy: step, "
        "step_size: 1, gamma: 0.5}",
        "{type: adamw, lr: 0.01, weight_decay: 0.1, lr_policy: step, step_size: 2, gamma: 0.3}",
        "{type: adam, lr: 0.01, weight_decay: 0.05}", "{type: rmsprop, lr: 0.01, momentum: 0.5, centered: true}"}) {
    SCOPED_TRACE(config);
    Solver tabled(SolverConfig::parse(ConfigNode::parse(config, "solver")));
    Solver alone(SolverConfig::parse(ConfigNode::parse(config, "solver")));
    std::vector<Param> a(6), b(6);
    std::vector<Param*> list;
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    for (int k = 0; k < 6; ++k) {
      const int64_t n = k == 3 ? 0 : 50 * k + 7;
      for (std::vector<Param>* ps : {&a, &b}) {
        Param& p = (*ps)[k];
        p.name = "p" + std::to_string(k);
        p.shape = {n};
        p.lr_mult = k % 2 ? 1.f : 2.f;
        p.decay_mult = k == 4 ? 0.f : 1.f;
        p.learnable = k != 5;
        p.value = Tensor({n});
        p.grad = Tensor({n});
      }
      for (int64_t i = 0; i < n; ++i) a[k].value[i] = b[k].value[i] = uni(rng), a[k].grad[i] = b[k].grad[i] = uni(rng);
      list.push_back(&a[k]);
    }
    for (int64_t iter = 0; iter < 4; ++iter) {
      tabled.set_iteration(iter);
      alone.set_iteration(iter);
      const std::vector<UpdateSlice>& table = tabled.update_table(list);
      ASSERT_EQ(table.size(), 5u);
      apply_update_table(table.data(), int(table.size()), nullptr, 13);
      for (Param& p : b) alone.update(p);
    }
    for (int k = 0; k < 6; ++k) {
      const int64_t n = a[k].value.numel();
      ASSERT_EQ(n == 0 || std::memcmp(a[k].value.data(), b[k].value.data(), n * sizeof(float)) == 0, true) << k;
      if (!b[k].learnable) continue;
      const Tensor& sa = tabled.state().at(a[k].name);
      const Tensor& sb = alone.state().at(b[k].name);
      ASSERT_EQ(sa.numel(), sb.numel());
      ASSERT_EQ(n == 0 || std::memcmp(sa.data(), sb.data(), sa.numel() * sizeof(float)) == 0, true) << k << " state";
      if (alone.counts_steps()) EXPECT_EQ(tabled.steps().at(a[k].name), 4);
    }
  }
}

}  // namespace
}  // namespace poseidon
