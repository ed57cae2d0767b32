// Moves activations between the layer's NCHW tensors and NHWC (channels
// last), the layout oneDNN's bfloat16 AMX convolutions run in. oneDNN's own
// reorders between the two, at the few channels of CIFAR-sized networks,
// cost about as much as the convolution they feed (NHWC to NCHW of 32
// channels at half of memory speed); these transpose 16x16 tiles in AVX-512
// registers instead, and between bfloat16 tensors 16-bit words without
// widening them. The same kernels give nChw16c, the 16-channel blocks of
// oneDNN's other AVX-512 convolutions: NHWC of N * C / 16 images of 16
// channels each.
#pragma once

#include <cstdint>

namespace poseidon {

struct NhwcShape {
  int64_t batch = 0, channels = 0, pixels = 0;  // pixels: H * W
};

// True where this CPU runs the kernels and the channels come in whole tiles:
// 16 channels with AVX-512F, 8 with AVX2; elsewhere the caller keeps
// oneDNN's reorders.
bool nhwc_transpose_supported(const NhwcShape& shape);

// NCHW float32 -> NHWC, in float32 or rounded to bfloat16 (nearest even, as
// oneDNN rounds), written as raw 16-bit words.
void nchw_to_nhwc(const float* src, const NhwcShape& shape, float* dst);
void nchw_to_nhwc_bf16(const float* src, const NhwcShape& shape, uint16_t* dst);

// NHWC float32 or bfloat16 -> NCHW float32, overwriting dst or adding onto
// it.
void nhwc_to_nchw(const float* src, const NhwcShape& shape, float* dst, bool add);
void nhwc_bf16_to_nchw(const uint16_t* src, const NhwcShape& shape, float* dst, bool add);

// The same between bfloat16 tensors (the conv layer's bfloat16 blobs): words
// move unchanged (a signalling NaN comes out quiet), and an addition onto dst
// takes each sum in float32 and rounds it once, as add_rounded_into_bf16
// (core/blob_types.h) does.
void nchw_bf16_to_nhwc_bf16(const uint16_t* src, const NhwcShape& shape, uint16_t* dst);
void nhwc_bf16_to_nchw_bf16(const uint16_t* src, const NhwcShape& shape, uint16_t* dst, bool add);

}  // namespace poseidon
