// Finite-difference gradient checking for any registered layer type, shared
// by the tests (tests/layers) and `poseidon check-layer`.
// A case names a layer config (YAML) and its input shapes; the checker builds
// the layer alone, projects its outputs onto fixed random weights to get a
// scalar loss, and compares backward's input and parameter gradients with
// central differences (step 1e-2, relative tolerance 1e-3 scaled by
// max(|a|, |b|, 1)). Inputs are distinct values away from zero, so kinks
// (ReLU at 0, ties in max pooling) are not crossed by a step. Input gradients
// start away from zero and what backward adds to them is checked, so a layer
// that overwrites them instead of adding fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace poseidon {

struct GradCase {
  std::string name;                   // label
  std::string yaml;                   // one layer's config, e.g. "{name: r, type: relu}"
  std::vector<Shape> inputs;          // input shapes
  std::vector<int64_t> label_classes; // per input: > 0 makes it integer labels in [0, n)
  bool train = true;                  // phase
  double step = 1e-2;
  double tolerance = 1e-3;
  bool fuse_relu = false;             // the layer applies a ReLU to its output (core/relu_fusion.h)
};

// One checked tensor: an input's gradient or a parameter's.
struct GradCheckEntry {
  std::string what;  // "input 0", "fc.weight"
  int64_t checked = 0, mismatches = 0;
  double max_error = 0;  // largest |analytic - numeric| / max(|analytic|, |numeric|, 1)
};

struct GradCheckReport {
  std::vector<GradCheckEntry> entries;
  std::string mismatches;  // the first mismatches, one a line; empty when all agree
  bool passed() const { return mismatches.empty(); }
};

GradCheckReport run_grad_check(const GradCase& c);

// Runs the check; returns an empty string on success, else what went wrong.
std::string check_gradients(const GradCase& c);

}  // namespace poseidon
