// What the bf16 layer tests share (bf16_test.cpp on the CPU,
// gpu_bf16_test.cpp on a GPU): the normwise error of a result against its
// reference, the tolerances a bfloat16 result is held to, whether oneDNN
// has bfloat16 kernels on this CPU (layers/dnnl_support.h), and random
// operands that bfloat16 holds exactly.
#pragma once

#include <cmath>
#include <random>
#include <string>

#include "core/bf16.h"
#include "core/tensor.h"
#include "layers/dnnl_support.h"

namespace poseidon::testing {

// ||got - want|| / ||want|| over host tensors.
inline double norm_relative_error(const Tensor& got, const Tensor& want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

// bfloat16 keeps 8 significant bits: rounding x and w each moves a product
// by up to 2 u (u = 2^-8 = 3.9e-3) of itself, and in the float32 sums of
// such products the errors, independent and of either sign, grow as the
// square root of the terms while the sums of the random operands here grow
// alike; so the whole result is off by about u, normwise. 1e-2 (2.5 u)
// leaves room for that and is still far below what a wrong element among a
// few hundred would cause.
constexpr double kBf16Tolerance = 1e-2;
// Above float32's own rounding differences (the two precisions also sum in
// other orders), below any bfloat16 rounding: the bf16 path really rounds.
constexpr double kFloat32Noise = 1e-5;

// Random values that bfloat16 holds exactly, in float32: normal about
// `mean`, of spread 1, rounded.
inline Tensor bf16_exact(const Shape& shape, std::mt19937_64& rng, float mean = 0.f) {
  std::normal_distribution<float> normal(mean, 1.f);
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = from_bf16(to_bf16(normal(rng)));
  return t;
}

}  // namespace poseidon::testing
