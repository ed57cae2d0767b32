// The gradient-check cases of the layer tests: each test file registers its
// cases with GRAD_CASE; registry_grad_test.cpp runs them all through the
// checker in core/grad_check.h.
#pragma once

#include <ostream>
#include <vector>

#include "core/grad_check.h"

namespace poseidon::testing {

using ::poseidon::check_gradients;
using ::poseidon::GradCase;

// Registers a case at static-initialisation time; see GRAD_CASE.
bool register_grad_case(GradCase c);
const std::vector<GradCase>& grad_cases();

}  // namespace poseidon::testing

#define POSEIDON_GRAD_CASE_CAT2(a, b) a##b
#define POSEIDON_GRAD_CASE_CAT(a, b) POSEIDON_GRAD_CASE_CAT2(a, b)
#define GRAD_CASE(...)                                                                 \
  static const bool POSEIDON_GRAD_CASE_CAT(poseidon_grad_case_, __LINE__) =            \
      ::poseidon::testing::register_grad_case(::poseidon::testing::GradCase{__VA_ARGS__})

namespace poseidon {
inline void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }
}  // namespace poseidon
