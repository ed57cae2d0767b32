// AVX-512 tile transposes between NCHW and NHWC (see channel_transpose.h). The build targets any x86-64, so the kernels
// carry their instruction set as a function attribute and run only after a check of the CPU.
#include "layers/channel_transpose.h"

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POSEIDON_CHANNEL_TRANSPOSE 1
// GCC's AVX-512 intrinsics fill unused operands with _mm512_undefined_ps(),
// which its flow analysis then reports as maybe uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace poseidon {

#ifdef POSEIDON_CHANNEL_TRANSPOSE
namespace {

#define AVX512 __attribute__((target("avx512f")))

// r[i] holds lane j of row i on entry and lane i of row j on return.
AVX512 inline void transpose16(__m512 r[16]) {
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

// Round to nearest even, keeping NaNs NaN (a payload only in the low bits
// would otherwise round to infinity).
AVX512 inline __m256i to_bf16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

AVX512 inline void store(float* dst, __m512 v) { _mm512_storeu_ps(dst, v); }
AVX512 inline void store(uint16_t* dst, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), to_bf16(v)); }

inline __mmask16 first(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

template <class Out>
AVX512 void to_nhwc(const float* src, const NhwcShape& l, Out* dst) {
  const int64_t blocks = l.channels / 16, hw = l.pixels;
#pragma omp parallel for collapse(2) if (l.batch * l.channels * hw > 32768)
  for (int64_t n = 0; n < l.batch; ++n)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* s = src + (n * l.channels + b * 16) * hw;
      Out* d = dst + n * l.channels * hw + b * 16;
      for (int64_t p0 = 0; p0 < hw; p0 += 16) {
        const int64_t m = std::min<int64_t>(16, hw - p0);
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_maskz_loadu_ps(first(m), s + i * hw + p0);
        transpose16(r);
        for (int64_t j = 0; j < m; ++j) store(d + (p0 + j) * l.channels, r[j]);
      }
    }
}

AVX512 void from_nhwc(const float* src, const NhwcShape& l, float* dst, bool add) {
  const int64_t blocks = l.channels / 16, hw = l.pixels;
#pragma omp parallel for collapse(2) if (l.batch * l.channels * hw > 32768)
  for (int64_t n = 0; n < l.batch; ++n)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* s = src + n * l.channels * hw + b * 16;
      float* d = dst + (n * l.channels + b * 16) * hw;
      for (int64_t p0 = 0; p0 < hw; p0 += 16) {
        const int64_t m = std::min<int64_t>(16, hw - p0);
        __m512 r[16];
        for (int64_t j = 0; j < 16; ++j)
          r[j] = j < m ? _mm512_loadu_ps(s + (p0 + j) * l.channels) : _mm512_setzero_ps();
        transpose16(r);
        for (int i = 0; i < 16; ++i) {
          float* row = d + i * hw + p0;
          const __m512 v = add ? _mm512_add_ps(r[i], _mm512_maskz_loadu_ps(first(m), row)) : r[i];
          _mm512_mask_storeu_ps(row, first(m), v);
        }
      }
    }
}

#undef AVX512

}  // namespace

bool nhwc_transpose_supported(const NhwcShape& shape) {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && shape.channels % 16 == 0;
}

void nchw_to_nhwc(const float* src, const NhwcShape& shape, float* dst) { to_nhwc(src, shape, dst); }

void nchw_to_nhwc_bf16(const float* src, const NhwcShape& shape, uint16_t* dst) { to_nhwc(src, shape, dst); }

void nhwc_to_nchw(const float* src, const NhwcShape& shape, float* dst, bool add) { from_nhwc(src, shape, dst, add); }

#else

// Elsewhere no layout is supported, so the callers keep oneDNN's reorders.
bool nhwc_transpose_supported(const NhwcShape&) { return false; }
void nchw_to_nhwc(const float*, const NhwcShape&, float*) {}
void nchw_to_nhwc_bf16(const float*, const NhwcShape&, uint16_t*) {}
void nhwc_to_nchw(const float*, const NhwcShape&, float*, bool) {}

#endif

}  // namespace poseidon
