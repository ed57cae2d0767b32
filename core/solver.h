// Solver: SGD with momentum (plain or Nesterov) and weight decay, with the
// semantics of torch.optim.SGD (dampening 0):
//   g = grad + decay * w;  buf = momentum * buf + g;
//   step = nesterov ? g + momentum * buf : buf;  w -= lr * step
// The update works on any contiguous block, so a parameter server can run it
// on the shard it owns and optimizer state stays sharded.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/config_node.h"
#include "core/layer.h"
#include "core/lr_schedule.h"

namespace poseidon {

struct SolverConfig {
  std::string type = "sgd";
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
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
  explicit Solver(SolverConfig config) : config_(std::move(config)) {}
  const SolverConfig& config() const { return config_; }

  // Sets the iteration whose gradients are applied next (selects the lr).
  void set_iteration(int64_t iter) { iter_ = iter; }
  int64_t iteration() const { return iter_; }
  double lr() const { return config_.lr.at(iter_); }

  // Applies the update to the whole parameter, with state kept under its name.
  void update(Param& param);
  // Applies the update to n contiguous elements; `momentum` holds their state.
  void update_block(float* value, const float* grad, float* momentum, int64_t n,
                    float lr_mult, float decay_mult) const;

  // Optimizer state by parameter name (checkpointed as "<name>.momentum_buffer").
  std::map<std::string, Tensor>& state() { return state_; }
  const std::map<std::string, Tensor>& state() const { return state_; }

 private:
  SolverConfig config_;
  int64_t iter_ = 0;
  std::map<std::string, Tensor> state_;
};

}  // namespace poseidon
