// The bfloat16 sum's loops (see sum_bf16.h).
#include "layers/sum_bf16.h"

#include <algorithm>

#include "core/bf16.h"
#include "core/blob_types.h"
#include "layers/cpu_vector.h"
#include "layers/relu_kernels.h"

namespace poseidon {

namespace {

// Elements summed at once in float32 on the stack: every input adds into
// them while they are in registers or L1.
constexpr int64_t kBlock = 256;

}  // namespace

POSEIDON_VECTOR_CLONES void sum_bf16_range(const uint16_t* const* x, int64_t begin, const float* c, size_t inputs,
                                           bool relu, uint16_t* y, int64_t n) {
  float acc[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) acc[i] = 0.f;
    for (size_t k = 0; k < inputs; ++k) {
      const uint16_t* in = x[k] + begin + b;
      const float ck = c[k];
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) acc[i] += ck * from_bf16(in[i]);
    }
    if (relu) {
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) acc[i] = acc[i] > 0.f ? acc[i] : 0.f;
    }
    round_into_bf16_serially(acc, y + b, m);
  }
}

// The fused ReLU's mask is taken on the bits, dy read either way
// (relu_kernels.h): a conditional load would keep GCC from vectorising.
POSEIDON_VECTOR_CLONES void share_bf16_range(const uint16_t* dy, const uint16_t* y, float c, uint16_t* dx,
                                             bool overwrite, int64_t n) {
  if (overwrite && y) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t g = dy[i];
      dx[i] = to_bf16(c * from_bf16(bf16_positive(y[i]) ? g : uint16_t{0}));
    }
  } else if (overwrite) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = to_bf16(c * from_bf16(dy[i]));
  } else if (y) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t g = dy[i];
      dx[i] = to_bf16(from_bf16(dx[i]) + c * from_bf16(bf16_positive(y[i]) ? g : uint16_t{0}));
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dx[i] = to_bf16(from_bf16(dx[i]) + c * from_bf16(dy[i]));
  }
}

}  // namespace poseidon
