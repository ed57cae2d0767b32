// The ReLU's element-wise passes, shared by the ReLU layer's expression and
// the layers that apply a fused ReLU themselves (core/relu_fusion.h): the
// range kernels work on a chunk the caller already holds in cache, the
// whole-tensor ones spread chunks over the threads.
#pragma once

#include <cstdint>

namespace poseidon {

// y = max(y, 0) in place, as the ReLU layer writes it (NaN becomes 0).
void relu_range_in_place(float* y, int64_t n);
// dy = 0 where the (ReLU'd) output y is not positive, in place: the ReLU
// layer's backward read at its output, which is positive where its input is.
void relu_grad_range_in_place(const float* y, float* dy, int64_t n);

void relu_in_place(float* y, int64_t n);
void relu_grad_in_place(const float* y, float* dy, int64_t n);
// bfloat16 bits: positive where the sign is clear and the value is neither
// zero nor a NaN (0x7f80 is +inf), as `x > 0` reads the float: a test of
// the bits, which GCC vectorises where widening each value would not be.
inline bool bf16_positive(uint16_t h) {
  const int16_t s = static_cast<int16_t>(h);
  return s > 0 && s <= 0x7f80;
}

// The same on a bfloat16 output and output gradient (core/blob_types.h).
void relu_grad_range_in_place(const uint16_t* y, uint16_t* dy, int64_t n);
void relu_grad_in_place(const uint16_t* y, uint16_t* dy, int64_t n);

}  // namespace poseidon
