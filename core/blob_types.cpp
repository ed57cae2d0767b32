// The CPU casts between float32 and bfloat16 blobs (see blob_types.h).
#include "core/blob_types.h"

#include <algorithm>

#include "core/bf16.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace poseidon {

DType moved_type(const std::vector<DType>& inputs, bool keeps_fp32) {
  if (keeps_fp32 || inputs.empty()) return DType::f32;
  for (DType t : inputs)
    if (t != DType::bf16) return DType::f32;
  return DType::bf16;
}

void widen_bf16(const uint16_t* from, float* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = from_bf16(from[i]);
}

void widen_bf16_serially(const uint16_t* from, float* to, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i] = from_bf16(from[i]);
}

namespace {

void round_serially(const float* from, uint16_t* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
// core/bf16.h's to_bf16, sixteen at a time with AVX-512 where the CPU has it
// (the portable build's loop gets SSE2 at most): the Solver's update writes
// each bf16 weight's copy through here, and for mlp_2048's 14.7M weights
// the SSE2 loop inside the update took 13 ms of a 75 ms step (2 threads).
__attribute__((target("avx512f"))) void round_avx512(const float* from, uint16_t* to, int64_t n) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), infinity = _mm512_set1_epi32(0x7f800000);
  const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_loadu_si512(from + i);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, magnitude), infinity);
    const __m512i high = _mm512_srli_epi32(u, 16);
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(high, one))), 16);
    const __m512i bits = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + i), _mm512_cvtepi32_epi16(bits));
  }
  round_serially(from + i, to + i, n - i);
}

const bool kAvx512 = __builtin_cpu_supports("avx512f");
#endif

}  // namespace

void round_into_bf16_serially(const float* from, uint16_t* to, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kAvx512) return round_avx512(from, to, n);
#endif
  round_serially(from, to, n);
}

namespace {

// serially(from + begin, to + begin, length) over blocks of 8192 values, in
// parallel beyond 65536 of them.
template <class From, class Serially>
void in_parallel_blocks(const From* from, uint16_t* to, int64_t n, Serially serially) {
  constexpr int64_t kBlock = 8192;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (n > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock;
    serially(from + begin, to + begin, std::min(kBlock, n - begin));
  }
}

}  // namespace

void round_into_bf16(const float* from, uint16_t* to, int64_t n) {
  in_parallel_blocks(from, to, n, round_into_bf16_serially);
}

void add_rounded_into_bf16(const float* from, uint16_t* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from_bf16(to[i]) + from[i]);
}

void add_rounded_into_bf16_serially(const uint16_t* from, uint16_t* to, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from_bf16(to[i]) + from_bf16(from[i]));
}

void add_rounded_into_bf16(const uint16_t* from, uint16_t* to, int64_t n) {
  in_parallel_blocks(from, to, n, add_rounded_into_bf16_serially);
}

}  // namespace poseidon
