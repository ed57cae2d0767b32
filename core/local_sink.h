// LocalGradSink: single-process training. Each gradient is applied by the
// Solver the moment backward reports it.
#pragma once

#include "core/events.h"
#include "core/solver.h"

namespace poseidon {

class LocalGradSink : public GradSink {
 public:
  explicit LocalGradSink(Solver& solver) : solver_(solver) {}
  void grad_ready(Param& param) override { solver_.update(param); }

 private:
  Solver& solver_;
};

}  // namespace poseidon
