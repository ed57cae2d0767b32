// AVX-512 and AVX2 tile transposes between NCHW and NHWC (see channel_transpose.h). The build targets any x86-64, so
// the kernels carry their instruction set as a function attribute and run only after a check of the CPU.
#include "layers/channel_transpose.h"

#include <algorithm>

#include "layers/avx2_tiles.h"
#include "layers/avx512_tiles.h"

namespace poseidon {

#ifdef POSEIDON_AVX512_TILES
namespace {

// Each kernel moves one channel tile of one image over all its pixels: NCHW
// rows of `pixels` floats at `plain`, one per channel, and NHWC pixels
// `channels` elements apart at `nhwc`.

POSEIDON_AVX512 inline void store(float* dst, __m512 v) { _mm512_storeu_ps(dst, v); }
POSEIDON_AVX512 inline void store(uint16_t* dst, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), to_bf16(v));
}

template <class Out>
POSEIDON_AVX512 void tile16_to_nhwc(const float* plain, int64_t pixels, Out* nhwc, int64_t channels) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 16) {
    const int64_t m = std::min<int64_t>(16, pixels - p0);
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_maskz_loadu_ps(first_lanes(m), plain + i * pixels + p0);
    transpose16(r);
    for (int64_t j = 0; j < m; ++j) store(nhwc + (p0 + j) * channels, r[j]);
  }
}

POSEIDON_AVX512 inline __m512 load(const float* src) { return _mm512_loadu_ps(src); }
POSEIDON_AVX512 inline __m512 load(const uint16_t* src) {
  return from_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
}

template <class In>
POSEIDON_AVX512 void tile16_from_nhwc(const In* nhwc, int64_t channels, float* plain, int64_t pixels, bool add) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 16) {
    const int64_t m = std::min<int64_t>(16, pixels - p0);
    __m512 r[16];
    for (int64_t j = 0; j < 16; ++j) r[j] = j < m ? load(nhwc + (p0 + j) * channels) : _mm512_setzero_ps();
    transpose16(r);
    for (int i = 0; i < 16; ++i) {
      float* row = plain + i * pixels + p0;
      const __m512 v = add ? _mm512_add_ps(r[i], _mm512_maskz_loadu_ps(first_lanes(m), row)) : r[i];
      _mm512_mask_storeu_ps(row, first_lanes(m), v);
    }
  }
}

// The same in 8-channel tiles of 256-bit registers. Masked loads and stores
// serve only the last, partial tile of pixels: AMD's cores run vmaskmovps
// stores as microcode, several times slower than plain ones.
POSEIDON_AVX2 inline void store(float* dst, __m256 v) { _mm256_storeu_ps(dst, v); }
POSEIDON_AVX2 inline void store(uint16_t* dst, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), to_bf16(v));
}

template <class Out>
POSEIDON_AVX2 void tile8_to_nhwc(const float* plain, int64_t pixels, Out* nhwc, int64_t channels) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 8) {
    const int64_t m = std::min<int64_t>(8, pixels - p0);
    __m256 r[8];
    for (int i = 0; i < 8; ++i) {
      const float* row = plain + i * pixels + p0;
      r[i] = m == 8 ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, first_lanes8(m));
    }
    transpose8(r);
    for (int64_t j = 0; j < m; ++j) store(nhwc + (p0 + j) * channels, r[j]);
  }
}

POSEIDON_AVX2 inline __m256 load8(const float* src) { return _mm256_loadu_ps(src); }
POSEIDON_AVX2 inline __m256 load8(const uint16_t* src) {
  return from_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
}

template <class In>
POSEIDON_AVX2 void tile8_from_nhwc(const In* nhwc, int64_t channels, float* plain, int64_t pixels, bool add) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 8) {
    const int64_t m = std::min<int64_t>(8, pixels - p0);
    const __m256i valid = first_lanes8(m);
    __m256 r[8];
    for (int64_t j = 0; j < 8; ++j) r[j] = j < m ? load8(nhwc + (p0 + j) * channels) : _mm256_setzero_ps();
    transpose8(r);
    for (int i = 0; i < 8; ++i) {
      float* row = plain + i * pixels + p0;
      if (m == 8)
        _mm256_storeu_ps(row, add ? _mm256_add_ps(r[i], _mm256_loadu_ps(row)) : r[i]);
      else
        _mm256_maskstore_ps(row, valid, add ? _mm256_add_ps(r[i], _mm256_maskload_ps(row, valid)) : r[i]);
    }
  }
}

// Which kernels move a shape: 16-channel tiles where the CPU has AVX-512 and
// the channels fill them, else 8-channel tiles where it has AVX2.
bool sixteen_channel_tiles(const NhwcShape& shape) {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && shape.channels % 16 == 0;
}

bool eight_channel_tiles(const NhwcShape& shape) {
  static const bool cpu = __builtin_cpu_supports("avx2");
  return cpu && shape.channels % 8 == 0;
}

// Runs move(plain offset, NHWC offset) for every image and channel tile of
// `width` channels, in parallel.
template <class Move>
void each_channel_tile(const NhwcShape& l, int64_t width, Move move) {
  const int64_t tiles = l.channels / width;
#pragma omp parallel for collapse(2) if (l.batch * l.channels * l.pixels > 32768)
  for (int64_t n = 0; n < l.batch; ++n)
    for (int64_t t = 0; t < tiles; ++t)
      move((n * l.channels + t * width) * l.pixels, n * l.channels * l.pixels + t * width);
}

template <class Out>
void to_nhwc(const float* src, const NhwcShape& l, Out* dst) {
  if (sixteen_channel_tiles(l))
    each_channel_tile(
        l, 16, [&](int64_t plain, int64_t nhwc) { tile16_to_nhwc(src + plain, l.pixels, dst + nhwc, l.channels); });
  else
    each_channel_tile(
        l, 8, [&](int64_t plain, int64_t nhwc) { tile8_to_nhwc(src + plain, l.pixels, dst + nhwc, l.channels); });
}

template <class In>
void from_nhwc(const In* src, const NhwcShape& l, float* dst, bool add) {
  if (sixteen_channel_tiles(l))
    each_channel_tile(l, 16, [&](int64_t plain, int64_t nhwc) {
      tile16_from_nhwc(src + nhwc, l.channels, dst + plain, l.pixels, add);
    });
  else
    each_channel_tile(l, 8, [&](int64_t plain, int64_t nhwc) {
      tile8_from_nhwc(src + nhwc, l.channels, dst + plain, l.pixels, add);
    });
}

}  // namespace

bool nhwc_transpose_supported(const NhwcShape& shape) {
  return sixteen_channel_tiles(shape) || eight_channel_tiles(shape);
}

void nchw_to_nhwc(const float* src, const NhwcShape& shape, float* dst) { to_nhwc(src, shape, dst); }

void nchw_to_nhwc_bf16(const float* src, const NhwcShape& shape, uint16_t* dst) { to_nhwc(src, shape, dst); }

void nhwc_to_nchw(const float* src, const NhwcShape& shape, float* dst, bool add) { from_nhwc(src, shape, dst, add); }

void nhwc_bf16_to_nchw(const uint16_t* src, const NhwcShape& shape, float* dst, bool add) {
  from_nhwc(src, shape, dst, add);
}

#else

// Elsewhere no layout is supported, so the callers keep oneDNN's reorders.
bool nhwc_transpose_supported(const NhwcShape&) { return false; }
void nchw_to_nhwc(const float*, const NhwcShape&, float*) {}
void nchw_to_nhwc_bf16(const float*, const NhwcShape&, uint16_t*) {}
void nhwc_to_nchw(const float*, const NhwcShape&, float*, bool) {}
void nhwc_bf16_to_nchw(const uint16_t*, const NhwcShape&, float*, bool) {}

#endif

}  // namespace poseidon
