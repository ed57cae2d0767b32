// Finite-difference gradient checking for any registered layer type.
// A case names a layer config (YAML) and its input shapes; the checker builds
// the layer alone, projects its outputs onto fixed random weights to get a
// scalar loss, and compares backward's input and parameter gradients with
// central differences (step 1e-2, relative tolerance 1e-3 scaled by
// max(|a|, |b|, 1)). Inputs are distinct values away from zero, so kinks
// (ReLU at 0, ties in max pooling) are not crossed by a step.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace poseidon::testing {

struct GradCase {
  std::string name;                   // test label
  std::string yaml;                   // one layer's config, e.g. "{name: r, type: relu}"
  std::vector<Shape> inputs;          // input shapes
  std::vector<int64_t> label_classes; // per input: > 0 makes it integer labels in [0, n)
  bool train = true;                  // phase
  double step = 1e-2;
  double tolerance = 1e-3;
};

// Registers a case at static-initialisation time; see GRAD_CASE.
bool register_grad_case(GradCase c);
const std::vector<GradCase>& grad_cases();

// Runs the check; returns an empty string on success, else what went wrong.
std::string check_gradients(const GradCase& c);

}  // namespace poseidon::testing

#define POSEIDON_GRAD_CASE_CAT2(a, b) a##b
#define POSEIDON_GRAD_CASE_CAT(a, b) POSEIDON_GRAD_CASE_CAT2(a, b)
#define GRAD_CASE(...)                                                                 \
  static const bool POSEIDON_GRAD_CASE_CAT(poseidon_grad_case_, __LINE__) =            \
      ::poseidon::testing::register_grad_case(::poseidon::testing::GradCase{__VA_ARGS__})

namespace poseidon::testing {
inline void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }
}  // namespace poseidon::testing
