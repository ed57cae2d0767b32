// The sum layer's loops over bfloat16 blobs (layers/sum.h), on a range of
// elements, in vector clones like the float32 loops: every input widened,
// the weighted sum and a fused ReLU taken in float32, rounded once. They
// round each product and each addition on its own, as the GPU's kernels
// do (sum.cu), so both write the same bits: sum_bf16.cpp is compiled
// without contracting a multiply and an add into one fused multiply-add.
#pragma once

#include <cstddef>
#include <cstdint>

namespace poseidon {

// y[0, n) = (0 + c[0] * x[0] + c[1] * x[1] + ...) rounded, left to right,
// from elements [begin, begin + n) of each input; with `relu` max of the
// sum and 0 first.
void sum_bf16_range(const uint16_t* const* x, int64_t begin, const float* c, size_t inputs, bool relu, uint16_t* y,
                    int64_t n);

// dx = c * g rounded (`overwrite`), else (dx + c * g) rounded, where g is
// dy, or with a fused ReLU's output y (non-null) dy where y is positive and
// 0 elsewhere.
void share_bf16_range(const uint16_t* dy, const uint16_t* y, float c, uint16_t* dx, bool overwrite, int64_t n);

}  // namespace poseidon
