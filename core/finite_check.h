// Finite checks for training: a NaN or an infinity in the loss or in a
// gradient stops training before it reaches the parameters. The common case,
// everything finite, costs one branch-free pass over the gradients; only a
// failure pays for finding and naming the culprit.
// A layer may spare a gradient that pass by proving it finite from its
// operands (Param::grad_bounded): an fc layer's weight gradient dy^T x is far
// larger than x and dy, whose largest magnitudes bound every element of it
// (product_sums_finite). That pass is otherwise a read of every gradient from
// memory: 6% of an fp32 training step of models/mlp_2048.yaml, 8% of a bf16
// step of VGG19-22K at 32x32 pixels.
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
// The largest |data[i]| over [0, n) (0 when n is 0), or NaN when data holds
// a NaN or an infinity.
float max_abs(const float* data, int64_t n);
// The same over bfloat16 bits.
float max_abs_bf16(const uint16_t* bits, int64_t n);
// Whether every sum of at most `terms` products a * b with |a| <= max_a and
// |b| <= max_b is finite however float32 arithmetic rounds and orders it,
// also with both factors first rounded to bfloat16: each rounding grows a
// magnitude by at most a factor 1 + 2^-8, so below 2^22 terms the computed
// sum stays under 2 * terms * max_a * max_b, and that is asked to stay under
// a quarter of the largest float32 (each factor under a quarter too, so that
// rounding it cannot overflow). False for NaN or infinite bounds.
bool product_sums_finite(float max_a, float max_b, int64_t terms);
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

// Where the last forward's values first turned non-finite: the first net
// input holding a NaN or an infinity (NonFinite::layer empty), else the first
// layer, in forward order, one of whose outputs does (tensor: the blob). A
// fused ReLU's output is its producer's, so that producer is named. Read
// only once the loss is found non-finite: it reads every blob.
std::optional<NonFinite> find_non_finite_output(Net& net);
// "non-finite loss (nan)", followed by where find_non_finite_output places
// the first non-finite value when it finds one:
// "non-finite loss (nan), first in the output of layer 'fc2' (blob 'fc2',
// first at index 7: inf)" or "..., first in the input 'data' (first at ...)".
std::string describe_non_finite_loss(float loss, Net& net);

}  // namespace poseidon
