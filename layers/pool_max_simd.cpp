// Max pooling at stride 2 in AVX-512 and AVX2 intrinsics (see pool_max_simd.h).
// Both keep the portable loops' rule: taps in row-major order, a larger value
// or a NaN takes the window, so among equal values the first wins and of two
// NaNs the later.
#include "layers/pool_max_simd.h"

#include <algorithm>
#include <array>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace poseidon {

#if defined(__x86_64__) && defined(__GNUC__)
namespace {

// The 2x2 window at stride 2 without padding (LeNet's and VGG's pooling): 16
// outputs of a row at once, the even and odd input columns of both input
// rows split out by permutes, then the four taps. The row's last outputs go
// masked.
bool max_2x2_stride2(const PoolGeometry& g) {
  return g.kernel == std::array<int64_t, 2>{2, 2} && g.stride == std::array<int64_t, 2>{2, 2} &&
         g.pad == std::array<int64_t, 2>{0, 0} && 2 * g.out_h <= g.in_h && 2 * g.out_w <= g.in_w;
}

__attribute__((target("avx512f"))) inline void max_2x2_tap(__m512 v, __m512i at, __m512& best, __m512i& best_at) {
  const __mmask16 take = _mm512_cmp_ps_mask(v, best, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  best = _mm512_mask_mov_ps(best, take, v);
  best_at = _mm512_mask_mov_epi32(best_at, take, at);
}

__attribute__((target("avx512f"))) void max_2x2_planes(const PoolGeometry& g, const float* src, float* dst,
                                                       int32_t* argmax, int64_t planes) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i one = _mm512_set1_epi32(1), below = _mm512_set1_epi32(static_cast<int32_t>(g.in_w));
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < planes; ++p, src += in_plane, dst += out_plane, argmax += out_plane)
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const float* r0 = src + 2 * oy * g.in_w;
      const float* r1 = r0 + g.in_w;
      for (int64_t ox = 0; ox < g.out_w; ox += 16) {
        const int64_t n = std::min<int64_t>(16, g.out_w - ox);
        const __mmask16 out_mask = static_cast<__mmask16>((1u << n) - 1);
        const __mmask16 lo = static_cast<__mmask16>(n >= 8 ? 0xffffu : (1u << (2 * n)) - 1);
        const __mmask16 hi = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1 : 0);
        const float* a = r0 + 2 * ox;
        const float* b = r1 + 2 * ox;
        const __m512 a0 = _mm512_maskz_loadu_ps(lo, a), a1 = _mm512_maskz_loadu_ps(hi, a + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(lo, b), b1 = _mm512_maskz_loadu_ps(hi, b + 16);
        const __m512i first = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * oy * g.in_w + 2 * ox)), even);
        __m512 best = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        __m512i best_at = first;
        max_2x2_tap(_mm512_permutex2var_ps(a0, even, a1), first, best, best_at);
        max_2x2_tap(_mm512_permutex2var_ps(a0, odd, a1), _mm512_add_epi32(first, one), best, best_at);
        const __m512i second = _mm512_add_epi32(first, below);
        max_2x2_tap(_mm512_permutex2var_ps(b0, even, b1), second, best, best_at);
        max_2x2_tap(_mm512_permutex2var_ps(b0, odd, b1), _mm512_add_epi32(second, one), best, best_at);
        _mm512_mask_storeu_ps(dst + oy * g.out_w + ox, out_mask, best);
        _mm512_mask_storeu_epi32(argmax + oy * g.out_w + ox, out_mask, best_at);
      }
    }
}

// Any window at a column stride of 2, any padding and ceil mode: 8 outputs
// of a row at once. For each input row of the window, 16 consecutive input
// columns load as two vectors and split into even and odd columns, which are
// the taps of kernel columns j and j + 1 for the 8 outputs. Columns outside
// the row load as nothing (masked loads) and never take a window; neither do
// lanes past the row's last output.
struct Stride2Block {
  __m256 best;
  __m256i best_at;
  __m256i lanes;  // all ones for the block's outputs that exist
};

__attribute__((target("avx2"))) inline __m256i inside_row(__m256i columns, __m256i width) {
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), columns), _mm256_cmpgt_epi32(width, columns));
}

__attribute__((target("avx2"))) inline void stride2_tap(__m256 v, __m256i columns, __m256i width, __m256i row_at,
                                                        Stride2Block& b) {
  const __m256 larger = _mm256_or_ps(_mm256_cmp_ps(v, b.best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256 take = _mm256_and_ps(larger, _mm256_castsi256_ps(_mm256_and_si256(b.lanes, inside_row(columns, width))));
  b.best = _mm256_blendv_ps(b.best, v, take);
  b.best_at = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(b.best_at), _mm256_castsi256_ps(_mm256_add_epi32(row_at, columns)), take));
}

__attribute__((target("avx2"))) void max_stride2_planes(const PoolGeometry& g, const float* src, float* dst,
                                                        int32_t* argmax, int64_t planes) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i evens = _mm256_add_epi32(iota, iota), one = _mm256_set1_epi32(1);
  const __m256i width = _mm256_set1_epi32(static_cast<int32_t>(g.in_w));
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t p = 0; p < planes; ++p, src += in_plane, dst += out_plane, argmax += out_plane)
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const int64_t y0 = oy * g.stride[0] - g.pad[0];
      const int64_t first_row = std::max<int64_t>(y0, 0), end_row = std::min(y0 + g.kernel[0], g.in_h);
      for (int64_t ox = 0; ox < g.out_w; ox += 8) {
        const int32_t n = static_cast<int32_t>(std::min<int64_t>(8, g.out_w - ox));
        const int32_t left = static_cast<int32_t>(2 * ox - g.pad[1]);  // kernel column 0's input column, output ox
        const __m256i left_columns = _mm256_add_epi32(_mm256_set1_epi32(left), evens);
        Stride2Block b;
        b.lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota);
        b.best = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
        b.best_at = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(first_row * g.in_w)),
                                     _mm256_max_epi32(left_columns, _mm256_setzero_si256()));
        for (int64_t iy = first_row; iy < end_row; ++iy) {
          const float* row = src + iy * g.in_w;
          const __m256i row_at = _mm256_set1_epi32(static_cast<int32_t>(iy * g.in_w));
          for (int32_t j = 0; j < g.kernel[1]; j += 2) {
            const int32_t from = left + j;  // the 16 columns from here hold taps j and j + 1
            __m256 lo, hi;
            if (from >= 0 && from + 16 <= g.in_w) {
              lo = _mm256_loadu_ps(row + from);
              hi = _mm256_loadu_ps(row + from + 8);
            } else {
              const __m256i at = _mm256_add_epi32(_mm256_set1_epi32(from), iota);
              const __m256i next = _mm256_add_epi32(at, _mm256_set1_epi32(8));
              lo = _mm256_maskload_ps(row + from, inside_row(at, width));
              hi = _mm256_maskload_ps(row + from + 8, inside_row(next, width));
            }
            // [c0 c2 c8 c10 | c4 c6 c12 c14] -> [c0 c2 c4 c6 c8 c10 c12 c14], and so for the odd columns.
            const __m256 even =
                _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
            const __m256 odd =
                _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
            const __m256i columns = _mm256_add_epi32(left_columns, _mm256_set1_epi32(j));
            stride2_tap(even, columns, width, row_at, b);
            if (j + 1 < g.kernel[1]) stride2_tap(odd, _mm256_add_epi32(columns, one), width, row_at, b);
          }
        }
        if (n == 8) {
          _mm256_storeu_ps(dst + oy * g.out_w + ox, b.best);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(argmax + oy * g.out_w + ox), b.best_at);
        } else {
          _mm256_maskstore_ps(dst + oy * g.out_w + ox, b.lanes, b.best);
          _mm256_maskstore_epi32(argmax + oy * g.out_w + ox, b.lanes, b.best_at);
        }
      }
    }
}

}  // namespace

bool max_planes_simd(const PoolGeometry& g, const float* src, float* dst, int32_t* argmax, int64_t planes) {
  static const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  if (avx512 && max_2x2_stride2(g)) {
    max_2x2_planes(g, src, dst, argmax, planes);
    return true;
  }
  if (avx2 && g.stride[1] == 2) {
    max_stride2_planes(g, src, dst, argmax, planes);
    return true;
  }
  return false;
}

#else

bool max_planes_simd(const PoolGeometry&, const float*, float*, int32_t*, int64_t) { return false; }

#endif

}  // namespace poseidon
