// The registered gradient-check cases of the layer tests.
#include "layers/grad_check.h"

namespace poseidon::testing {

namespace {
std::vector<GradCase>& cases() {
  static std::vector<GradCase> c;
  return c;
}
}  // namespace

bool register_grad_case(GradCase c) {
  cases().push_back(std::move(c));
  return true;
}

const std::vector<GradCase>& grad_cases() { return cases(); }

}  // namespace poseidon::testing
