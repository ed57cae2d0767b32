// AVX-512 and AVX2 tile transposes between NCHW and NHWC (see channel_transpose.h). The build targets any x86-64, so
// the kernels carry their instruction set as a function attribute and run only after a check of the CPU.
#include "layers/channel_transpose.h"

#include <algorithm>
#include <type_traits>

#include "layers/avx2_tiles.h"
#include "layers/avx512_tiles.h"

namespace poseidon {

#ifdef POSEIDON_AVX512_TILES
namespace {

// Each kernel moves one channel tile of one image over all its pixels: NCHW
// rows of `pixels` elements at `plain`, one per channel, and NHWC pixels
// `channels` elements apart at `nhwc`. Elements travel as float32 in the
// registers: bfloat16 ones are widened on loading and rounded on storing
// (core/bf16.h's rounding, which gives a widened word back unchanged, a
// signalling NaN quieted), except between two bfloat16 tensors, whose
// words move as they are (words16_to_nhwc below).

POSEIDON_AVX512 inline __m512 load(const float* src) { return _mm512_loadu_ps(src); }
POSEIDON_AVX512 inline __m512 load(const uint16_t* src) {
  return from_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
}
POSEIDON_AVX512 inline void store(float* dst, __m512 v) { _mm512_storeu_ps(dst, v); }
POSEIDON_AVX512 inline void store(uint16_t* dst, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), to_bf16(v));
}

// The first m (1 to 16) elements of a plain row, zeros after them.
POSEIDON_AVX512 inline __m512 load_row(const float* row, int64_t m) {
  return _mm512_maskz_loadu_ps(first_lanes(m), row);
}
POSEIDON_AVX512 inline __m512 load_row(const uint16_t* row, int64_t m) {
  if (m == 16) return load(row);
  uint16_t part[16] = {};
  std::copy_n(row, m, part);
  return load(part);
}

// v's first m elements into a plain row, or added onto what it holds: for
// bfloat16 the sum of the two in float32, rounded once (as
// add_rounded_into_bf16 adds).
POSEIDON_AVX512 inline void store_row(float* row, __m512 v, int64_t m, bool add) {
  const __mmask16 valid = first_lanes(m);
  _mm512_mask_storeu_ps(row, valid, add ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(valid, row)) : v);
}
POSEIDON_AVX512 inline void store_row(uint16_t* row, __m512 v, int64_t m, bool add) {
  if (add) v = _mm512_add_ps(load_row(row, m), v);
  if (m == 16) return store(row, v);
  uint16_t part[16];
  store(part, v);
  std::copy_n(part, m, row);
}

// Pixels from `first` on (a multiple of 16).
template <class In, class Out>
POSEIDON_AVX512 void tile16_to_nhwc(const In* plain, int64_t pixels, Out* nhwc, int64_t channels, int64_t first = 0) {
  for (int64_t p0 = first; p0 < pixels; p0 += 16) {
    const int64_t m = std::min<int64_t>(16, pixels - p0);
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = load_row(plain + i * pixels + p0, m);
    transpose16(r);
    for (int64_t j = 0; j < m; ++j) store(nhwc + (p0 + j) * channels, r[j]);
  }
}

template <class In, class Out>
POSEIDON_AVX512 void tile16_from_nhwc(const In* nhwc, int64_t channels, Out* plain, int64_t pixels, bool add,
                                      int64_t first = 0) {
  for (int64_t p0 = first; p0 < pixels; p0 += 16) {
    const int64_t m = std::min<int64_t>(16, pixels - p0);
    __m512 r[16];
    for (int64_t j = 0; j < 16; ++j) r[j] = j < m ? load(nhwc + (p0 + j) * channels) : _mm512_setzero_ps();
    transpose16(r);
    for (int i = 0; i < 16; ++i) store_row(plain + i * pixels + p0, r[i], m, add);
  }
}

// Between bfloat16 tensors the words need no widening: 32 pixels of a
// 16-channel tile move as 16-bit words, about a third of the instructions
// of the widening tiles above. Two channels' words interleave into one
// 32-bit element per pixel, the 16x16 transpose of 32-bit elements runs on
// 8 channel pairs by 2 halves of 32 pixels, and each result register holds
// the 16 channels of pixel j in its low half and of pixel j + 16 in its
// high half; back to NCHW the same in reverse. Every word arrives as it
// left (a signalling NaN too). Needs AVX-512BW (vpermt2w).

// The index operand of _mm512_permutex2var_epi16(a, index, b): word k of the
// result is word index(k) of a, or of b from index 32 on.
template <class Index>
POSEIDON_AVX512BW inline __m512i word_index(Index index) {
  alignas(64) uint16_t words[32];
  for (int k = 0; k < 32; ++k) words[k] = static_cast<uint16_t>(index(k));
  return _mm512_load_si512(words);
}

POSEIDON_AVX512BW void words16_to_nhwc(const uint16_t* plain, int64_t pixels, uint16_t* nhwc, int64_t channels) {
  // a0 b0 a1 b1 ... a15 b15, and the same from word 16 on.
  const __m512i low = word_index([](int k) { return (k % 2) * 32 + k / 2; });
  const __m512i high = word_index([](int k) { return (k % 2) * 32 + k / 2 + 16; });
  const int64_t whole = pixels / 32 * 32;
  for (int64_t p0 = 0; p0 < whole; p0 += 32) {
    __m512 r[16];
    for (int k = 0; k < 8; ++k) {
      const __m512i a = _mm512_loadu_si512(plain + 2 * k * pixels + p0);
      const __m512i b = _mm512_loadu_si512(plain + (2 * k + 1) * pixels + p0);
      r[k] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(a, low, b));
      r[k + 8] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(a, high, b));
    }
    transpose16(r);
    for (int j = 0; j < 16; ++j) {
      const __m512i v = _mm512_castps_si512(r[j]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(nhwc + (p0 + j) * channels), _mm512_castsi512_si256(v));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(nhwc + (p0 + j + 16) * channels), _mm512_extracti64x4_epi64(v, 1));
    }
  }
  tile16_to_nhwc(plain, pixels, nhwc, channels, whole);
}

// 32 words to a plain row, or each added onto the word there as store_row
// adds (in float32, the sum rounded once).
POSEIDON_AVX512BW inline void store_words(uint16_t* row, __m512i v, bool add) {
  if (!add) return _mm512_storeu_si512(row, v);
  store_row(row, from_bf16(_mm512_castsi512_si256(v)), 16, true);
  store_row(row + 16, from_bf16(_mm512_extracti64x4_epi64(v, 1)), 16, true);
}

POSEIDON_AVX512BW void words16_from_nhwc(const uint16_t* nhwc, int64_t channels, uint16_t* plain, int64_t pixels,
                                         bool add) {
  // The even words of a then of b (the first channel of each pair), and the
  // odd ones.
  const __m512i even = word_index([](int k) { return 2 * k; });
  const __m512i odd = word_index([](int k) { return 2 * k + 1; });
  const int64_t whole = pixels / 32 * 32;
  for (int64_t p0 = 0; p0 < whole; p0 += 32) {
    __m512 r[16];
    for (int j = 0; j < 16; ++j) {
      const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nhwc + (p0 + j) * channels));
      const __m256i second = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nhwc + (p0 + j + 16) * channels));
      r[j] = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
    }
    transpose16(r);
    for (int k = 0; k < 8; ++k) {
      const __m512i a = _mm512_castps_si512(r[k]), b = _mm512_castps_si512(r[k + 8]);
      store_words(plain + 2 * k * pixels + p0, _mm512_permutex2var_epi16(a, even, b), add);
      store_words(plain + (2 * k + 1) * pixels + p0, _mm512_permutex2var_epi16(a, odd, b), add);
    }
  }
  tile16_from_nhwc(nhwc, channels, plain, pixels, add, whole);
}

// The same in 8-channel tiles of 256-bit registers. Masked loads and stores
// serve only the last, partial tile of pixels: AMD's cores run vmaskmovps
// stores as microcode, several times slower than plain ones.
POSEIDON_AVX2 inline __m256 load8(const float* src) { return _mm256_loadu_ps(src); }
POSEIDON_AVX2 inline __m256 load8(const uint16_t* src) {
  return from_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
}
POSEIDON_AVX2 inline void store(float* dst, __m256 v) { _mm256_storeu_ps(dst, v); }
POSEIDON_AVX2 inline void store(uint16_t* dst, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), to_bf16(v));
}

POSEIDON_AVX2 inline __m256 load_row8(const float* row, int64_t m) {
  return m == 8 ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, first_lanes8(m));
}
POSEIDON_AVX2 inline __m256 load_row8(const uint16_t* row, int64_t m) {
  if (m == 8) return load8(row);
  uint16_t part[8] = {};
  std::copy_n(row, m, part);
  return load8(part);
}

POSEIDON_AVX2 inline void store_row8(float* row, __m256 v, int64_t m, bool add) {
  if (m == 8) return _mm256_storeu_ps(row, add ? _mm256_add_ps(v, _mm256_loadu_ps(row)) : v);
  const __m256i valid = first_lanes8(m);
  _mm256_maskstore_ps(row, valid, add ? _mm256_add_ps(v, _mm256_maskload_ps(row, valid)) : v);
}
POSEIDON_AVX2 inline void store_row8(uint16_t* row, __m256 v, int64_t m, bool add) {
  if (add) v = _mm256_add_ps(load_row8(row, m), v);
  if (m == 8) return store(row, v);
  uint16_t part[8];
  store(part, v);
  std::copy_n(part, m, row);
}

template <class In, class Out>
POSEIDON_AVX2 void tile8_to_nhwc(const In* plain, int64_t pixels, Out* nhwc, int64_t channels) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 8) {
    const int64_t m = std::min<int64_t>(8, pixels - p0);
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = load_row8(plain + i * pixels + p0, m);
    transpose8(r);
    for (int64_t j = 0; j < m; ++j) store(nhwc + (p0 + j) * channels, r[j]);
  }
}

template <class In, class Out>
POSEIDON_AVX2 void tile8_from_nhwc(const In* nhwc, int64_t channels, Out* plain, int64_t pixels, bool add) {
  for (int64_t p0 = 0; p0 < pixels; p0 += 8) {
    const int64_t m = std::min<int64_t>(8, pixels - p0);
    __m256 r[8];
    for (int64_t j = 0; j < 8; ++j) r[j] = j < m ? load8(nhwc + (p0 + j) * channels) : _mm256_setzero_ps();
    transpose8(r);
    for (int i = 0; i < 8; ++i) store_row8(plain + i * pixels + p0, r[i], m, add);
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

bool word_tiles(const NhwcShape& shape) {
  static const bool cpu = __builtin_cpu_supports("avx512bw");
  return cpu && sixteen_channel_tiles(shape);
}

template <class In, class Out>
void to_nhwc(const In* src, const NhwcShape& l, Out* dst) {
  if constexpr (std::is_same_v<In, uint16_t> && std::is_same_v<Out, uint16_t>)
    if (word_tiles(l))
      return each_channel_tile(
          l, 16, [&](int64_t plain, int64_t nhwc) { words16_to_nhwc(src + plain, l.pixels, dst + nhwc, l.channels); });
  if (sixteen_channel_tiles(l))
    each_channel_tile(
        l, 16, [&](int64_t plain, int64_t nhwc) { tile16_to_nhwc(src + plain, l.pixels, dst + nhwc, l.channels); });
  else
    each_channel_tile(
        l, 8, [&](int64_t plain, int64_t nhwc) { tile8_to_nhwc(src + plain, l.pixels, dst + nhwc, l.channels); });
}

template <class In, class Out>
void from_nhwc(const In* src, const NhwcShape& l, Out* dst, bool add) {
  if constexpr (std::is_same_v<In, uint16_t> && std::is_same_v<Out, uint16_t>)
    if (word_tiles(l))
      return each_channel_tile(l, 16, [&](int64_t plain, int64_t nhwc) {
        words16_from_nhwc(src + nhwc, l.channels, dst + plain, l.pixels, add);
      });
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

void nchw_bf16_to_nhwc_bf16(const uint16_t* src, const NhwcShape& shape, uint16_t* dst) { to_nhwc(src, shape, dst); }

void nhwc_bf16_to_nchw_bf16(const uint16_t* src, const NhwcShape& shape, uint16_t* dst, bool add) {
  from_nhwc(src, shape, dst, add);
}

#else

// Elsewhere no layout is supported, so the callers keep oneDNN's reorders.
bool nhwc_transpose_supported(const NhwcShape&) { return false; }
void nchw_to_nhwc(const float*, const NhwcShape&, float*) {}
void nchw_to_nhwc_bf16(const float*, const NhwcShape&, uint16_t*) {}
void nhwc_to_nchw(const float*, const NhwcShape&, float*, bool) {}
void nhwc_bf16_to_nchw(const uint16_t*, const NhwcShape&, float*, bool) {}
void nchw_bf16_to_nhwc_bf16(const uint16_t*, const NhwcShape&, uint16_t*) {}
void nhwc_bf16_to_nchw_bf16(const uint16_t*, const NhwcShape&, uint16_t*, bool) {}

#endif

}  // namespace poseidon
