// Finite checks for training: a NaN or an infinity in the loss or in a
// gradient stops training before it reaches the parameters. The common case,
// everything finite, costs one branch-free pass over the flat gradient buffer;
// only a failure pays for finding and naming the culprit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/net.h"

namespace poseidon {

// True when none of data[0, n) is NaN or infinite.
bool all_finite(const float* data, int64_t n);
// Index of the first NaN or infinite element of data[0, n), or -1.
int64_t first_non_finite(const float* data, int64_t n);
// "nan", "inf" or "-inf".
std::string non_finite_text(float v);

// Where a non-finite value sits: which parameter of which layer, and the
// first bad element.
struct NonFinite {
  std::string layer;   // the layer owning the parameter, e.g. "conv2"
  std::string tensor;  // the parameter, e.g. "conv2.weight"
  int64_t index = 0;   // first non-finite element (flat, row-major)
  float value = 0.f;   // NaN, inf or -inf
  // "<what> in layer 'conv2', tensor 'conv2.weight' (first at index 123: nan)"
  std::string describe(const std::string& what) const;
};

// The first learnable parameter, in backward order (the layer nearest the
// loss first, where a non-finite value usually starts before backward
// spreads it), whose gradient holds a NaN or an infinity.
std::optional<NonFinite> find_non_finite_gradient(Net& net);

// The first parameter or buffer, in layer order, whose value holds a NaN or
// an infinity.
std::optional<NonFinite> find_non_finite_value(Net& net);

}  // namespace poseidon
