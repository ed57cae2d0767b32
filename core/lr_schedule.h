// Learning-rate policies (fixed, step, multistep, exp, poly, cosine) with an
// optional linear warm-up, as a pure function of the iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config_node.h"

namespace poseidon {

struct LrSchedule {
  std::string policy = "fixed";
  double base_lr = 0.01;
  double gamma = 0.1;               // step, multistep, exp
  int64_t step_size = 1;            // step
  std::vector<int64_t> milestones;  // multistep
  double power = 1.0;               // poly
  double min_lr = 0.0;              // cosine, poly floor
  int64_t max_iter = 1;             // poly, cosine horizon
  int64_t warmup_iters = 0;         // linear ramp from warmup_start * lr
  double warmup_start = 0.0;

  // The learning rate used by the update of iteration `iter` (0-based).
  double at(int64_t iter) const;
};

}  // namespace poseidon
