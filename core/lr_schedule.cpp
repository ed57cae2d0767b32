// Learning-rate policies.
#include "core/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace poseidon {

double LrSchedule::at(int64_t iter) const {
  double lr = base_lr;
  if (policy == "step") {
    lr = base_lr * std::pow(gamma, static_cast<double>(iter / std::max<int64_t>(1, step_size)));
  } else if (policy == "multistep") {
    int64_t passed = std::count_if(milestones.begin(), milestones.end(),
                                   [&](int64_t m) { return iter >= m; });
    lr = base_lr * std::pow(gamma, static_cast<double>(passed));
  } else if (policy == "exp") {
    lr = base_lr * std::pow(gamma, static_cast<double>(iter));
  } else if (policy == "poly") {
    double frac = std::min(1.0, static_cast<double>(iter) / std::max<int64_t>(1, max_iter));
    lr = min_lr + (base_lr - min_lr) * std::pow(1.0 - frac, power);
  } else if (policy == "cosine") {
    double frac = std::min(1.0, static_cast<double>(iter) / std::max<int64_t>(1, max_iter));
    lr = min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(std::numbers::pi * frac));
  }
  if (iter < warmup_iters) {
    double t = static_cast<double>(iter) / static_cast<double>(warmup_iters);
    lr *= warmup_start + (1.0 - warmup_start) * t;
  }
  return lr;
}

}  // namespace poseidon
