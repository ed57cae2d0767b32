// Precision bf16 on the GPU (core/precision.h): the fill of a bfloat16
// tensor, the casts between float32 tensors and bfloat16 ones (Tensor's
// casts, the bfloat16 copies that cuDNN and cuBLAS multiply), and the sum
// of a gradient into a bfloat16 one at a float32 layer's edge (rounded to
// nearest even, bit for bit as the CPU rounds: core/bf16.h).
// bfloat16 values are passed as their 16 bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace poseidon::cuda {

// ptr[i] = value (a bfloat16's 16 bits).
void fill_bf16(uint16_t* ptr, size_t n, uint16_t value, cudaStream_t stream);
// dst[i] = src[i] rounded to bfloat16.
void round_to_bf16(uint16_t* dst, const float* src, size_t n, cudaStream_t stream);
// dst[i] = src[i] widened to float32; with `accumulate`, dst[i] += it.
void widen_bf16(float* dst, const uint16_t* src, size_t n, bool accumulate, cudaStream_t stream);
// dst[i] = (dst[i] + src[i]) rounded, the sum taken in float32: a gradient
// joining a bfloat16 one that others add into (core/blob_types.h).
void add_rounded_into_bf16(uint16_t* dst, const float* src, size_t n, cudaStream_t stream);
void add_rounded_into_bf16(uint16_t* dst, const uint16_t* src, size_t n, cudaStream_t stream);

}  // namespace poseidon::cuda
