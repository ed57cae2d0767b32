// AVX2 register helpers for the layers' layout kernels on CPUs whose widest
// vectors are 256 bits (channel_transpose.cpp's 8-channel transposes, the
// ones oneDNN's AVX2 convolutions need for their nChw8c blocks). Like
// avx512_tiles.h, each helper carries its instruction set as a function
// attribute and runs only after the caller has checked the CPU.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstdint>
#define POSEIDON_AVX2_TILES 1

#define POSEIDON_AVX2 __attribute__((target("avx2")))

namespace poseidon {

// r[i] holds lane j of row i on entry and lane i of row j on return.
POSEIDON_AVX2 inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  // Each 128-bit half H of u[4k+m] now holds rows 4k..4k+3 of column 4H+m.
  for (int k = 0; k < 2; ++k) {
    u[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
  }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
    r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
  }
}

// Eight floats rounded to bfloat16 as core/bf16.h's to_bf16 rounds one: to
// nearest even, a NaN kept a NaN.
POSEIDON_AVX2 inline __m128i to_bf16(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i words = _mm256_blendv_epi8(rounded, quiet_nan, nan);
  // Every 32-bit lane holds a value below 2^16: packing keeps it unchanged.
  const __m256i packed = _mm256_packus_epi32(words, words);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

// Eight bfloat16 words widened to float32 (exact).
POSEIDON_AVX2 inline __m256 from_bf16(__m128i v) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

// A mask of the first n (0..8) lanes, for maskload and maskstore.
POSEIDON_AVX2 inline __m256i first_lanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace poseidon

#endif
