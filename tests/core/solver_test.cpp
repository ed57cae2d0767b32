// Solver: the SGD update against a hand-computed PyTorch-semantics reference,
// and every learning-rate policy.
#include <gtest/gtest.h>

#include <algorithm>
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

namespace {
Param host_param(const std::string& name, const std::vector<float>& value, const std::vector<float>& grad,
                 float lr_mult = 1.f, float decay_mult = 1.f) {
  Param p;
  p.name = name;
  p.shape = {static_cast<int64_t>(value.size())};
  p.lr_mult = lr_mult;
  p.decay_mult = decay_mult;
  p.value = Tensor(p.shape);
  std::copy(value.begin(), value.end(), p.value.data());
  if (!grad.empty()) {
    p.grad = Tensor(p.shape);
    std::copy(grad.begin(), grad.end(), p.grad.data());
  } else {
    p.learnable = false;
  }
  return p;
}

// torch.optim.SGD's step on one element, in double.
struct Reference {
  double w, buf = 0;
  bool started = false;
  void step(double g, double lr, double momentum, double decay) {
    const double gi = g + decay * w;
    buf = started ? momentum * buf + gi : gi;
    started = true;
    w -= lr * buf;
  }
};
}  // namespace

// Solver::update on whole parameters: each keeps its own momentum buffer
// under its name, made at its first update; each uses its own lr and decay
// multipliers and the schedule's rate at the solver's iteration; a parameter
// not updated in an iteration keeps its state; buffers are left alone.
TEST(Solver, UpdateKeepsPerParameterStateByName) {
  SolverConfig c;
  c.momentum = 0.9;
  c.weight_decay = 0.1;
  c.lr.base_lr = 0.5;
  c.lr.policy = "step";
  c.lr.gamma = 0.1;
  c.lr.step_size = 2;
  Solver s(c);
  Param weight = host_param("fc.weight", {1.f, -1.f, 2.f, -2.f}, {0.5f, 0.25f, -0.5f, 1.f});
  Param bias = host_param("fc.bias", {0.5f, -0.5f}, {1.f, -1.f}, 2.f, 0.f);
  Param stat = host_param("bn.running_mean", {3.f, 4.f}, {});
  std::vector<Reference> rw, rb;
  for (int64_t i = 0; i < 4; ++i) rw.push_back({weight.value[i]});
  for (int64_t i = 0; i < 2; ++i) rb.push_back({bias.value[i]});
  EXPECT_TRUE(s.state().empty());
  for (int64_t it = 0; it < 4; ++it) {
    s.set_iteration(it);
    const double lr = it < 2 ? 0.5 : 0.05;
    s.update(weight);
    for (int64_t i = 0; i < 4; ++i) rw[i].step(weight.grad[i], lr, 0.9, 0.1);
    if (it != 2) {  // the bias sits out an iteration: its buffer must not move
      s.update(bias);
      for (int64_t i = 0; i < 2; ++i) rb[i].step(bias.grad[i], 2 * lr, 0.9, 0.0);
    }
    s.update(stat);
    for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(weight.value[i], rw[i].w, 1e-5) << "iteration " << it;
    for (int64_t i = 0; i < 2; ++i) EXPECT_NEAR(bias.value[i], rb[i].w, 1e-5) << "iteration " << it;
  }
  ASSERT_EQ(s.state().size(), 2u);
  ASSERT_TRUE(s.state().count("fc.weight") && s.state().count("fc.bias"));
  EXPECT_EQ(s.state().at("fc.weight").shape(), weight.shape);
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(s.state().at("fc.weight")[i], rw[i].buf, 1e-5);
  for (int64_t i = 0; i < 2; ++i) EXPECT_NEAR(s.state().at("fc.bias")[i], rb[i].buf, 1e-5);
  EXPECT_EQ(stat.value[0], 3.f);
  EXPECT_EQ(stat.value[1], 4.f);

  // State handed to another solver (a checkpoint) continues exactly.
  Solver resumed(c);
  resumed.state()["fc.weight"] = Tensor(weight.shape);
  resumed.state()["fc.weight"].copy_from(s.state().at("fc.weight"));
  Param copy = host_param("fc.weight", std::vector<float>(weight.value.data(), weight.value.data() + 4),
                          std::vector<float>(weight.grad.data(), weight.grad.data() + 4));
  s.set_iteration(4);
  resumed.set_iteration(4);
  s.update(weight);
  resumed.update(copy);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(weight.value[i], copy.value[i]);
}

TEST(Solver, UpdateWithoutMomentumKeepsNoState) {
  SolverConfig c;
  c.lr.base_lr = 0.25;
  Solver s(c);
  Param p = host_param("w", {1.f, 2.f}, {4.f, -4.f});
  s.update(p);
  EXPECT_TRUE(s.state().empty());
  EXPECT_FLOAT_EQ(p.value[0], 0.f);
  EXPECT_FLOAT_EQ(p.value[1], 3.f);
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
