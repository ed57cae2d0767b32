// LocalGradSink: single-process training. Each gradient is applied by the
// Solver the moment backward reports it, or, when updates are held, all at
// once by apply_held() after backward: the trainer then checks every gradient
// for NaN and infinity first, so a rejected iteration changes no parameter.
// Holding changes no number: each parameter's update reads only its own
// value, gradient and solver state.
#pragma once

#include <vector>

#include "core/events.h"
#include "core/solver.h"

namespace poseidon {

class LocalGradSink : public GradSink {
 public:
  explicit LocalGradSink(Solver& solver, bool hold_updates = false) : solver_(solver), hold_(hold_updates) {}

  void grad_ready(Param& param) override {
    if (hold_)
      held_.push_back(&param);
    else
      solver_.update(param);
  }

  // Applies the held updates in the order backward reported them (those on
  // a GPU in a few launches: Solver::update_all).
  // On a GPU they change nothing where `rejected` holds a non-zero value
  // (the finite guard: core/step_gate.h).
  void apply_held(const float* rejected = nullptr) {
    solver_.update_all(held_, rejected);
    held_.clear();  // keeps the capacity: later iterations do not allocate
  }
  // Drops the held updates: the iteration that computed them is rejected.
  void discard_held() { held_.clear(); }
  const std::vector<Param*>& held() const { return held_; }

 private:
  Solver& solver_;
  bool hold_;
  std::vector<Param*> held_;
};

}  // namespace poseidon
