// Solver config parsing and the update rules' loops (see solver.h).
#include "core/solver.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/blob_types.h"
#include "core/device_memory.h"

namespace poseidon {

namespace {

// Keys only some rules read, and which.
struct RuleKey {
  const char* key;
  std::vector<std::string> types;
};

const std::vector<RuleKey>& rule_keys() {
  static const std::vector<RuleKey> k = {{"momentum", {"sgd", "rmsprop"}}, {"nesterov", {"sgd"}},
                                         {"betas", {"adam", "adamw"}},     {"eps", {"adam", "adamw", "rmsprop"}},
                                         {"alpha", {"rmsprop"}},           {"centered", {"rmsprop"}}};
  return k;
}

template <class Element>
void for_each_element(int64_t n, Element element) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) element(i);
}

// Which copy rounded to bfloat16 an update loop writes beside the value, as
// a template argument of the loops, so that each loop is one branch-free
// body. The bfloat16 bits are written in a pass of their own after the loop
// (update_block), vectorised where the loop's rounding would not be.
enum class Rounded { none, floats };

template <Rounded R>
inline void store_rounded(const RoundedOut& out, const float* w, int64_t i) {
  if constexpr (R == Rounded::floats) out.floats[i] = from_bf16(to_bf16(w[i]));
}

// Calls loop(std::integral_constant<Rounded, ...>) for the copy `out` names.
template <class Loop>
void with_rounded(const RoundedOut& out, Loop loop) {
  if (out.floats) return loop(std::integral_constant<Rounded, Rounded::floats>{});
  loop(std::integral_constant<Rounded, Rounded::none>{});
}

// SGD's loops written out rather than through for_each_element's lambda:
// GCC vectorised neither that way (measured: 60 ms for the 14.7M parameters
// of models/mlp_2048.yaml, a fifth of its training step). The arithmetic is
// update_rules.h's, element for element.
template <Rounded R>
void sgd_loop(const UpdateStep& step, float* w, const float* g, const RoundedOut& out, int64_t n) {
  const UpdateStep s = step;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    sgd_element(s, w, g, nullptr, i);
    store_rounded<R>(out, w, i);
  }
}

template <bool Nesterov, Rounded R>
void sgd_momentum_loop(const UpdateStep& step, float* w, const float* g, float* buf, const RoundedOut& out,
                       int64_t n) {
  const UpdateStep s = step;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    sgd_momentum_element<Nesterov>(s, w, g, buf, i);
    store_rounded<R>(out, w, i);
  }
}

}  // namespace

const std::vector<std::string>& SolverConfig::keys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> all = {"type",         "lr",           "weight_decay", "max_iter", "lr_policy",
                                    "gamma",        "step_size",    "milestones",   "power",    "min_lr",
                                    "warmup_iters", "warmup_start", "check_finite"};
    for (const RuleKey& r : rule_keys()) all.push_back(r.key);
    return all;
  }();
  return k;
}

SolverConfig SolverConfig::parse(const ConfigNode& node) {
  node.check_keys(keys());
  SolverConfig c;
  c.type = node.get_choice("type", {"sgd", "adam", "adamw", "rmsprop"}, "sgd");
  for (const RuleKey& r : rule_keys()) {
    if (!node.has(r.key) || std::find(r.types.begin(), r.types.end(), c.type) != r.types.end()) continue;
    std::string list;
    for (const auto& t : r.types) list += (list.empty() ? "" : ", ") + t;
    node.child(r.key).fail(std::string("'") + r.key + "' applies to " + list + ", not to type " + c.type +
                           " (remove it: --set " + node.path() + "." + r.key + "=null)");
  }
  c.momentum = node.get_double("momentum", 0.0);
  c.nesterov = node.get_bool("nesterov", false);
  // PyTorch's defaults: AdamW decays by 1e-2, the others not at all.
  c.weight_decay = node.get_double("weight_decay", c.type == "adamw" ? 1e-2 : 0.0);
  c.eps = node.get_double("eps", c.eps);
  c.alpha = node.get_double("alpha", c.alpha);
  c.centered = node.get_bool("centered", c.centered);
  if (auto betas = node.find("betas")) {
    if (!betas->is_sequence() || betas->size() != 2) betas->fail("expected two numbers, [beta1, beta2]");
    c.beta1 = betas->at(0).as_double();
    c.beta2 = betas->at(1).as_double();
    if (!(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1)) betas->fail("expected 0 <= beta < 1 for both");
  }
  c.max_iter = node.get_int("max_iter", c.max_iter);
  c.check_finite = node.get_bool("check_finite", c.check_finite);
  if (c.max_iter <= 0) node.child("max_iter").fail("expected a positive integer");
  if (c.momentum < 0 || c.momentum >= 1) node.child("momentum").fail("expected 0 <= momentum < 1");
  if (c.nesterov && c.momentum == 0) node.child("nesterov").fail("Nesterov needs momentum > 0");
  if (!(c.eps >= 0)) node.child("eps").fail("expected eps >= 0");
  if (!(c.alpha >= 0 && c.alpha < 1)) node.child("alpha").fail("expected 0 <= alpha < 1");
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

Solver::Solver(SolverConfig config) : config_(std::move(config)) {
  const std::string& type = config_.type;
  if (type == "sgd") {
    rule_ = UpdateRule::sgd;
    // Kept under PyTorch's name even without momentum, so a checkpoint's
    // buffers survive a run that does not use them.
    state_names_ = {"momentum_buffer"};
    keeps_state_ = config_.momentum != 0.0;
  } else if (type == "adam" || type == "adamw") {
    rule_ = UpdateRule::adam;
    state_names_ = {"exp_avg", "exp_avg_sq"};
    keeps_state_ = true;
  } else if (type == "rmsprop") {
    rule_ = UpdateRule::rmsprop;
    state_names_ = {"square_avg"};
    if (config_.momentum != 0.0) state_names_.push_back("momentum_buffer");
    if (config_.centered) state_names_.push_back("grad_avg");
    keeps_state_ = true;
  } else {
    throw Error("unknown solver type '" + type + "' (expected sgd, adam, adamw or rmsprop)");
  }
}

Shape Solver::state_shape(const Shape& param) const {
  if (state_names_.size() == 1) return param;
  Shape s = {static_cast<int64_t>(state_names_.size())};
  s.insert(s.end(), param.begin(), param.end());
  return s;
}

void Solver::drop_state(const std::string& name) {
  state_.erase(name);
  steps_.erase(name);
}

float* Solver::state_of(Param& p) {
  if (!keeps_state_) return nullptr;
  Tensor& buf = state_[p.name];
  POSEIDON_CHECK(shape_numel(p.shape) == p.value.numel())
      << "parameter '" << p.name << "' declares " << shape_numel(p.shape) << " values but holds " << p.value.numel();
  if (!buf.defined()) buf = Tensor(state_shape(p.shape), p.value.device());
  return buf.data();
}

void Solver::uncount_steps(const std::vector<Param*>& params, int64_t steps) {
  if (!counts_steps()) return;
  for (const Param* p : params)
    if (p->learnable) steps_[p->name] -= steps;
}

void Solver::update_all(const std::vector<Param*>& params, const float* rejected) {
  on_gpu_.clear();  // keeps the capacity
  for (Param* p : params) {
    if (!p->learnable) continue;
    if (p->value.is_cuda())
      on_gpu_.push_back(p);
    else
      update(*p);
  }
  if (on_gpu_.empty()) return;
  const Device device = on_gpu_.front()->value.device();
  update_table(on_gpu_);
  const size_t bytes = table_.size() * sizeof(UpdateSlice);
  if (!table_upload_ || table_upload_->bytes() < bytes || !(table_upload_->device() == device))
    table_upload_ = std::make_shared<device_memory::StepUpload>(device, bytes);
  // A replay of a captured step works the table out again: the step counts
  // and the learning rate of its own iteration (core/step_recording.h).
  device_memory::gpu_update_table(*table_upload_, table_.data(), int(table_.size()), rejected, [this](void* slot) {
    update_table(on_gpu_);
    std::memcpy(slot, table_.data(), table_.size() * sizeof(UpdateSlice));
  });
}

const std::vector<UpdateSlice>& Solver::update_table(const std::vector<Param*>& params) {
  table_.clear();  // keeps the capacity
  const Param* first = nullptr;
  for (Param* p : params) {
    if (!p->learnable) continue;
    if (!first) first = p;
    POSEIDON_CHECK(p->value.device() == first->value.device())
        << "parameter '" << p->name << "' is on " << p->value.device().str() << ", '" << first->name << "' on "
        << first->value.device().str();
    float* state = state_of(*p);
    const int64_t step = counts_steps() ? ++steps_[p->name] : 1;
    // A GPU's bf16 layers round their own operands: no copy is written.
    p->rounded.current = false;
    add_update_slice(table_, step_numbers(p->lr_mult, p->decay_mult, step), p->value.data(), p->grad.data(), state,
                     p->value.numel());
  }
  return table_;
}

void Solver::update(Param& p) {
  if (!p.learnable) return;
  float* state = state_of(p);
  const int64_t step = counts_steps() ? ++steps_[p.name] : 1;
  if (p.value.is_cuda()) {
    p.rounded.current = false;
    device_memory::gpu_solver_update(p.value.device(), step_numbers(p.lr_mult, p.decay_mult, step), p.value.data(),
                                     p.grad.data(), state, p.value.numel());
    return;
  }
  const RoundedOut rounded = rounded_out(p);
  update_block(p.value.data(), p.grad.data(), state, p.value.numel(), p.lr_mult, p.decay_mult, step, rounded);
  mark_rounded(p, rounded);
}

UpdateStep Solver::step_numbers(float lr_mult, float decay_mult, int64_t step) const {
  UpdateStep s;
  s.rule = rule_;
  // In float, as SGD always has been: lr and decay first, then their multipliers.
  s.lr = static_cast<float>(lr()) * lr_mult;
  s.decay = static_cast<float>(config_.weight_decay) * decay_mult;
  s.momentum = static_cast<float>(config_.momentum);
  s.nesterov = config_.nesterov;
  s.eps = static_cast<float>(config_.eps);
  if (rule_ == UpdateRule::adam) {
    const double t = static_cast<double>(step);
    s.beta1 = static_cast<float>(config_.beta1);
    s.one_minus_beta1 = static_cast<float>(1 - config_.beta1);
    s.beta2 = static_cast<float>(config_.beta2);
    s.one_minus_beta2 = static_cast<float>(1 - config_.beta2);
    const double lr = s.lr, decay = s.decay;
    s.lr = static_cast<float>(lr / (1 - std::pow(config_.beta1, t)));
    s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(config_.beta2, t)));
    if (config_.type == "adamw") {
      s.shrink = static_cast<float>(1 - lr * decay);
      s.decay = 0.f;
    }
  }
  s.alpha = static_cast<float>(config_.alpha);
  s.one_minus_alpha = static_cast<float>(1 - config_.alpha);
  s.centered = config_.centered;
  return s;
}

void Solver::update_block(float* w, const float* g, float* state, int64_t n, float lr_mult, float decay_mult,
                          int64_t step, const RoundedOut& rounded) const {
  const UpdateStep s = step_numbers(lr_mult, decay_mult, step);
  with_rounded(rounded, [&](auto r) {
    constexpr Rounded R = decltype(r)::value;
    switch (rule_) {
      case UpdateRule::sgd:
        if (!state) return sgd_loop<R>(s, w, g, rounded, n);
        if (s.nesterov) return sgd_momentum_loop<true, R>(s, w, g, state, rounded, n);
        return sgd_momentum_loop<false, R>(s, w, g, state, rounded, n);
      case UpdateRule::adam:
        return for_each_element(n, [&](int64_t i) {
          adam_element(s, w, g, state, state + n, i);
          store_rounded<R>(rounded, w, i);
        });
      case UpdateRule::rmsprop: {
        float *buf, *avg;
        rmsprop_slots(s, state, n, &buf, &avg);
        return for_each_element(n, [&](int64_t i) {
          rmsprop_element(s, w, g, state, buf, avg, i);
          store_rounded<R>(rounded, w, i);
        });
      }
    }
  });
  if (rounded.bits) round_into_bf16(w, rounded.bits, n);
}

}  // namespace poseidon
