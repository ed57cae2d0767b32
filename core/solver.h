// Solver: the update rules of torch.optim, one parameter (or one block of
// one) at a time, with their semantics and state names:
//   sgd      g = grad + decay * w;  buf = momentum * buf + g;
//            step = nesterov ? g + momentum * buf : buf;  w -= lr * step
//   adam     g = grad + decay * w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//            w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   adamw    adam with decoupled decay: w *= 1 - lr * decay first, g = grad
//   rmsprop  g = grad + decay * w;  sq = alpha sq + (1 - alpha) g^2 (centred:
//            minus the square of the running mean of g); w -= lr * g / (sqrt(sq) + eps),
//            through a momentum buffer when momentum > 0
// The update works on any contiguous block, so a parameter server can run it
// on the shard it owns and optimizer state stays sharded.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/device_memory.h"
#include "core/layer.h"
#include "core/lr_schedule.h"
#include "core/update_groups.h"
#include "core/update_rules.h"

namespace poseidon {

struct SolverConfig {
  std::string type = "sgd";  // sgd, adam, adamw, rmsprop
  double momentum = 0.0;     // sgd, rmsprop
  bool nesterov = false;     // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999;  // adam, adamw
  double eps = 1e-8;                  // adam, adamw, rmsprop
  double alpha = 0.99;                // rmsprop
  bool centered = false;              // rmsprop
  int64_t max_iter = 1000;
  // Stop training at a NaN or infinite loss or gradient, before any parameter
  // changes (the trainer then holds updates until every gradient is checked).
  bool check_finite = true;
  LrSchedule lr;

  static SolverConfig parse(const ConfigNode& node);
  static const std::vector<std::string>& keys();
};

class Solver {
 public:
  explicit Solver(SolverConfig config);
  const SolverConfig& config() const { return config_; }

  // Sets the iteration whose gradients are applied next (selects the lr).
  void set_iteration(int64_t iter) { iter_ = iter; }
  int64_t iteration() const { return iter_; }
  double lr() const { return config_.lr.at(iter_); }

  // Applies the update to the whole parameter, with state kept under its name.
  // On the CPU it also writes the parameter's copy rounded to bfloat16
  // where a bf16 layer reads one (core/rounded_weight.h).
  void update(Param& param);
  // update() of each parameter, the same numbers; those on a GPU in one
  // launch over them all (core/update_groups.h) rather than one each.
  // On a GPU, `rejected` (GPU memory, may be null) is the finite guard's
  // flag (core/step_gate.h): where it is non-zero when the launches run they
  // change nothing, though the step counts were advanced (uncount_steps).
  void update_all(const std::vector<Param*>& params, const float* rejected = nullptr);
  // The host's part of update_all for parameters on one GPU: each learnable
  // one's step counted and its numbers for this step worked out, in a table
  // (core/update_groups.h) that update_all sends to the GPU as it is; kept
  // until the next call.
  const std::vector<UpdateSlice>& update_table(const std::vector<Param*>& params);
  // Takes back `steps` counted updates of each of `params` (Adam's bias
  // correction): those a rejected flag turned into nothing.
  void uncount_steps(const std::vector<Param*>& params, int64_t steps);
  // Applies the update to n contiguous elements. `state` holds their state,
  // slot after slot in state_names() order, n floats each (null when
  // keeps_state() is false); `step` is the number of this update of the
  // parameter, 1 for the first (read by the rules that count steps).
  // `rounded`, where set, receives each new value rounded to bfloat16
  // (core/rounded_weight.h), element by element right after it.
  void update_block(float* value, const float* grad, float* state, int64_t n, float lr_mult, float decay_mult,
                    int64_t step = 1, const RoundedOut& rounded = {}) const;

  // PyTorch's names of the state tensors of one parameter ("momentum_buffer";
  // "exp_avg", "exp_avg_sq"; "square_avg", ...), each shaped like it.
  const std::vector<std::string>& state_names() const { return state_names_; }
  // False where the update needs no state (SGD without momentum).
  bool keeps_state() const { return keeps_state_; }
  // Whether the state holds a count of the parameter's updates, as PyTorch's
  // does for Adam (bias correction) and RMSprop.
  bool counts_steps() const { return rule_ != UpdateRule::sgd; }
  // The shape of a parameter's packed state: the parameter's own for one
  // slot, [slots, ...shape] for several.
  Shape state_shape(const Shape& param) const;

  // Optimizer state by parameter name, packed as state_shape() says
  // (checkpointed as "<name>.<state name>", PyTorch's names).
  std::map<std::string, Tensor>& state() { return state_; }
  const std::map<std::string, Tensor>& state() const { return state_; }
  // Updates applied so far by parameter name (rules that count steps only).
  std::map<std::string, int64_t>& steps() { return steps_; }
  const std::map<std::string, int64_t>& steps() const { return steps_; }
  // Forgets a parameter's state and step count (a parameter server keeps them).
  void drop_state(const std::string& name);

 private:
  UpdateStep step_numbers(float lr_mult, float decay_mult, int64_t step) const;
  // The parameter's packed state (created on first use), null where the
  // rule keeps none.
  float* state_of(Param& p);

  SolverConfig config_;
  UpdateRule rule_;
  std::vector<std::string> state_names_;
  bool keeps_state_;
  int64_t iter_ = 0;
  std::map<std::string, Tensor> state_;
  std::map<std::string, int64_t> steps_;
  // update_all's GPU parameters and their table, kept so that they
  // allocate once, and its way to the GPU, made again where the table
  // outgrows it (shared
  // by a copy of the solver, such as a checkpoint's snapshot: its sends are
  // ordered on the same stream).
  std::vector<Param*> on_gpu_;
  std::vector<UpdateSlice> table_;
  std::shared_ptr<device_memory::StepUpload> table_upload_;
};

}  // namespace poseidon
