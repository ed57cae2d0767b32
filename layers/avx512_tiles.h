// AVX-512 register helpers shared by the layers' layout kernels (the NCHW <->
// NHWC transposes of channel_transpose.cpp, the blocked bfloat16 weights of
// bf16_pack.cpp) and the small-batch weight gradients' stores. The build
// targets any x86-64, so each helper carries its instruction set as a
// function attribute and runs only after the caller has checked the CPU.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POSEIDON_AVX512_TILES 1
// GCC's AVX-512 intrinsics fill unused operands with _mm512_undefined_ps(),
// which its flow analysis then reports as maybe uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define POSEIDON_AVX512 __attribute__((target("avx512f")))
// With the 16-bit word instructions (vpermt2w) as well.
#define POSEIDON_AVX512BW __attribute__((target("avx512f,avx512bw")))

namespace poseidon {

// r[i] holds lane j of row i on entry and lane i of row j on return.
POSEIDON_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  // Each 128-bit lane L of u[4k+m] now holds rows 4k..4k+3 of column 4L+m.
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  // Gather the four lanes of each column: first lanes {0,2} and {1,3} of row
  // groups {0,1} and {2,3}, then the pairs.
  for (int m = 0; m < 4; ++m) {
    t[m] = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
    t[4 + m] = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
    t[8 + m] = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
    t[12 + m] = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
  }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xDD);
    r[4 + m] = _mm512_shuffle_f32x4(t[4 + m], t[12 + m], 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(t[4 + m], t[12 + m], 0xDD);
  }
}

// Sixteen floats rounded to bfloat16 as core/bf16.h's to_bf16 rounds one:
// to nearest even, a NaN kept a NaN (a payload only in the low bits would
// otherwise round to infinity).
POSEIDON_AVX512 inline __m256i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

// Sixteen bfloat16 words widened to float32 (exact).
POSEIDON_AVX512 inline __m512 from_bf16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// A mask of the first n (0..16) lanes.
inline __mmask16 first_lanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// The lanes `valid` of v out to `at`: all sixteen streamed past the cache
// with kStream (`at` then aligned to 64 bytes), else stored through the mask.
template <bool kStream>
POSEIDON_AVX512 inline void store_lanes(float* at, __m512 v, __mmask16 valid) {
  if (kStream && valid == 0xffff)
    _mm512_stream_ps(at, v);
  else
    _mm512_mask_storeu_ps(at, valid, v);
}

}  // namespace poseidon

#endif
