// Solver: the SGD update against a hand-computed PyTorch-semantics reference,
// and every learning-rate policy.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/solver.h"

namespace poseidon {

TEST(Solver, MomentumWeightDecayMatchesTorchSemantics) {
  SolverConfig c;
  c.momentum = 0.9;
  c.weight_decay = 0.01;
  c.lr.base_lr = 0.1;
  Solver s(c);
  float w[2] = {1.f, -2.f}, g[2] = {0.5f, 0.25f}, buf[2] = {0.f, 0.f};
  double rw[2] = {1, -2}, rb[2] = {0, 0};
  for (int step = 0; step < 3; ++step) {
    s.update_block(w, g, buf, 2, 1.f, 1.f);
    for (int i = 0; i < 2; ++i) {
      double gi = g[i] + 0.01 * rw[i];
      rb[i] = step == 0 ? gi : 0.9 * rb[i] + gi;
      rw[i] -= 0.1 * rb[i];
      EXPECT_NEAR(w[i], rw[i], 1e-6);
    }
  }
}

TEST(Solver, NesterovAndMultipliers) {
  SolverConfig c;
  c.momentum = 0.5;
  c.nesterov = true;
  c.lr.base_lr = 1.0;
  Solver s(c);
  float w = 0.f, g = 1.f, buf = 0.f;
  s.update_block(&w, &g, &buf, 1, 0.5f, 0.f);  // buf = 1, step = 1 + 0.5 * 1, lr 0.5
  EXPECT_FLOAT_EQ(w, -0.75f);
  s.update_block(&w, &g, &buf, 1, 0.5f, 0.f);  // buf = 1.5, step = 1 + 0.75
  EXPECT_FLOAT_EQ(w, -0.75f - 0.875f);
}

TEST(LrSchedule, Policies) {
  LrSchedule s;
  s.base_lr = 1.0;
  s.gamma = 0.5;
  s.step_size = 10;
  s.policy = "step";
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 0.5);
  EXPECT_DOUBLE_EQ(s.at(25), 0.25);
  s.policy = "multistep";
  s.milestones = {5, 8};
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_DOUBLE_EQ(s.at(5), 0.5);
  EXPECT_DOUBLE_EQ(s.at(8), 0.25);
  s.policy = "exp";
  EXPECT_DOUBLE_EQ(s.at(3), 0.125);
  s.policy = "poly";
  s.max_iter = 100;
  s.power = 2;
  EXPECT_DOUBLE_EQ(s.at(50), 0.25);
  s.policy = "cosine";
  EXPECT_NEAR(s.at(50), 0.5, 1e-12);
  EXPECT_NEAR(s.at(100), 0.0, 1e-12);
  EXPECT_NEAR(s.at(25), 0.5 * (1 + std::cos(std::numbers::pi / 4)), 1e-12);
  s.policy = "fixed";
  s.warmup_iters = 10;
  s.warmup_start = 0.1;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(5), 0.55);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
}

TEST(SolverConfig, RejectsBadValues) {
  auto parse = [](const std::string& y) { return SolverConfig::parse(ConfigNode::parse(y, "s.yaml")); };
  EXPECT_NO_THROW(parse("{lr: 0.1, momentum: 0.9, lr_policy: multistep, milestones: [10, 20]}"));
  EXPECT_THROW(parse("{lr: -1}"), ConfigError);
  EXPECT_THROW(parse("{lr: 0.1, momentum: 1.5}"), ConfigError);
  EXPECT_THROW(parse("{lr: 0.1, nesterov: true}"), ConfigError);
  EXPECT_THROW(parse("{lr: 0.1, lr_policy: triangle}"), ConfigError);
  EXPECT_THROW(parse("{lr: 0.1, lr_policy: multistep}"), ConfigError);
  EXPECT_THROW(parse("{lr: 0.1, momentun: 0.9}"), ConfigError);
}

}  // namespace poseidon
