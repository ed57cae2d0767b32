// The many-parameter update's walk (core/update_groups.h), on the host as
// the GPU kernel runs it: 40 parameters of assorted sizes (empty ones
// included) in two groups, walked by any number of threads, must get, bit
// for bit, the per-element update each would get alone, in every rule and
// with its state slots where the per-parameter update puts them.
// CudaSolver.UpdateAllMatchesTheCpu (tests/core/cuda_test.cpp) runs the
// kernel itself against the CPU.
#include "core/update_groups.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

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

TEST(UpdateGroups, WalkGivesEachParameterItsOwnUpdate) {
  for (UpdateRule rule : {UpdateRule::sgd, UpdateRule::adam, UpdateRule::rmsprop})
    for (int64_t threads : {1, 7, 256, 100000}) {
      std::mt19937_64 rng(5);
      std::uniform_real_distribution<float> uni(-1.f, 1.f);
      std::vector<Owned> walked(40), alone;
      std::vector<UpdateStep> steps;
      for (int k = 0; k < 40; ++k) {
        const int64_t n = k % 9 == 4 ? 0 : (k * 37) % 101 + 1;
        Owned& o = walked[k];
        for (int64_t i = 0; i < n; ++i) o.value.push_back(uni(rng)), o.grad.push_back(uni(rng));
        for (int64_t i = 0; i < 3 * n; ++i) o.state.push_back(std::abs(uni(rng)));
        steps.push_back(step_for(rule, k));
      }
      alone = walked;
      std::vector<UpdateGroup> groups;
      for (int k = 0; k < 40; ++k)
        add_update_slice(groups, steps[k], walked[k].value.data(), walked[k].grad.data(), walked[k].state.data(),
                         int64_t(walked[k].value.size()));
      ASSERT_EQ(groups.size(), 2u);
      EXPECT_EQ(groups[0].count, UpdateGroup::kMaxSlices);
      for (const UpdateGroup& g : groups) apply_update_group(g, threads);
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
