// SGD update and solver config parsing.
#include "core/solver.h"

#include "core/device_memory.h"

namespace poseidon {

const std::vector<std::string>& SolverConfig::keys() {
  static const std::vector<std::string> k = {
      "type",       "lr",        "momentum",  "nesterov", "weight_decay", "max_iter",
      "lr_policy",  "gamma",     "step_size", "milestones", "power",      "min_lr",
      "warmup_iters", "warmup_start", "check_finite"};
  return k;
}

SolverConfig SolverConfig::parse(const ConfigNode& node) {
  node.check_keys(keys());
  SolverConfig c;
  c.type = node.get_choice("type", {"sgd"}, "sgd");
  c.momentum = node.get_double("momentum", 0.0);
  c.nesterov = node.get_bool("nesterov", false);
  c.weight_decay = node.get_double("weight_decay", 0.0);
  c.max_iter = node.get_int("max_iter", c.max_iter);
  c.check_finite = node.get_bool("check_finite", c.check_finite);
  if (c.max_iter <= 0) node.child("max_iter").fail("expected a positive integer");
  if (c.momentum < 0 || c.momentum >= 1) node.child("momentum").fail("expected 0 <= momentum < 1");
  if (c.nesterov && c.momentum == 0) node.child("nesterov").fail("Nesterov needs momentum > 0");
  LrSchedule& s = c.lr;
  s.base_lr = node.get_double("lr");
  if (s.base_lr <= 0) node.child("lr").fail("expected a positive learning rate");
  s.policy = node.get_choice("lr_policy", {"fixed", "step", "multistep", "exp", "poly", "cosine"},
                             "fixed");
  s.gamma = node.get_double("gamma", s.gamma);
  s.step_size = node.get_int("step_size", s.step_size);
  if (s.policy == "step" && s.step_size <= 0) node.child("step_size").fail("expected a positive step");
  if (node.has("milestones")) s.milestones = node.child("milestones").as_int_list();
  if (s.policy == "multistep" && s.milestones.empty())
    node.child("milestones").fail("multistep needs a list of iterations");
  s.power = node.get_double("power", s.power);
  s.min_lr = node.get_double("min_lr", s.min_lr);
  s.max_iter = c.max_iter;
  s.warmup_iters = node.get_int("warmup_iters", 0);
  s.warmup_start = node.get_double("warmup_start", 0.0);
  return c;
}

void Solver::update(Param& p) {
  if (!p.learnable) return;
  float* momentum = nullptr;
  if (config_.momentum != 0.0) {
    Tensor& buf = state_[p.name];
    if (!buf.defined()) buf = Tensor(p.shape, p.value.device());
    momentum = buf.data();
  }
  if (p.value.is_cuda()) {
    device_memory::gpu_sgd_update(p.value.device(), p.value.data(), p.grad.data(), momentum, p.value.numel(),
                                  static_cast<float>(lr()) * p.lr_mult, static_cast<float>(config_.momentum),
                                  static_cast<float>(config_.weight_decay) * p.decay_mult, config_.nesterov);
    return;
  }
  update_block(p.value.data(), p.grad.data(), momentum, p.value.numel(), p.lr_mult, p.decay_mult);
}

void Solver::update_block(float* w, const float* g, float* buf, int64_t n, float lr_mult,
                          float decay_mult) const {
  const float rate = static_cast<float>(this->lr()) * lr_mult;
  const float decay = static_cast<float>(config_.weight_decay) * decay_mult;
  const float m = static_cast<float>(config_.momentum);
  if (!buf) {
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) w[i] -= rate * (g[i] + decay * w[i]);
    return;
  }
  const bool nesterov = config_.nesterov;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] + decay * w[i];
    float b = m * buf[i] + gi;
    buf[i] = b;
    w[i] -= rate * (nesterov ? gi + m * b : b);
  }
}

}  // namespace poseidon
