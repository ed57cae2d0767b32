// ReLU passes in place (see relu_kernels.h).
#include "layers/relu_kernels.h"

#include "layers/cpu_vector.h"

namespace poseidon {

POSEIDON_VECTOR_CLONES void relu_range_in_place(float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.f ? y[i] : 0.f;
}

// dy is read either way, as in the ReLU layer: a conditional load would keep
// GCC from vectorising the loop.
POSEIDON_VECTOR_CLONES void relu_grad_range_in_place(const float* y, float* dy, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dy[i] = y[i] > 0.f ? g : 0.f;
  }
}

void relu_in_place(float* y, int64_t n) {
  parallel_chunks(n, [&](int64_t begin, int64_t end) { relu_range_in_place(y + begin, end - begin); });
}

void relu_grad_in_place(const float* y, float* dy, int64_t n) {
  parallel_chunks(n, [&](int64_t begin, int64_t end) { relu_grad_range_in_place(y + begin, dy + begin, end - begin); });
}

POSEIDON_VECTOR_CLONES void relu_grad_range_in_place(const uint16_t* y, uint16_t* dy, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t g = dy[i];
    dy[i] = bf16_positive(y[i]) ? g : uint16_t{0};
  }
}

void relu_grad_in_place(const uint16_t* y, uint16_t* dy, int64_t n) {
  parallel_chunks(n, [&](int64_t begin, int64_t end) { relu_grad_range_in_place(y + begin, dy + begin, end - begin); });
}

}  // namespace poseidon
