// One pass of W into both blocked bfloat16 copies (see bf16_pack.h): tile by
// tile of 64 x 64 elements, into registers and then a small buffer,
// from which W^T's blocks come by 16 x 16 transposes of bfloat16 pairs and
// W's by interleaving pairs of rows. The copies are written with streaming
// stores where aligned, which skip reading the lines they replace:
// `poseidon time` on models/mlp_2048.yaml (bf16, batch 128, 2 threads) ran
// its step about 10% faster with them than with plain stores.
#include "layers/bf16_pack.h"

#include <algorithm>
#include <cstdint>

#include "layers/avx512_tiles.h"

namespace poseidon {

#ifdef POSEIDON_AVX512_TILES
namespace {

constexpr int64_t kTile = 64;

// Sixteen elements of a row of W from `row` on; zeros past the `valid` first.
POSEIDON_AVX512 inline __m256i load_16(const uint16_t* row, int64_t valid) {
  if (valid == 16) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
  alignas(32) uint16_t part[16] = {};
  std::copy_n(row, valid, part);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
}

// Rows r0 .. r0 + 63, columns c0 .. c0 + 63 of W as bfloat16 pairs: word j of
// row i holds columns c0 + 2j (low half) and c0 + 2j + 1; zero outside W.
POSEIDON_AVX512 void load_tile(const uint16_t* w, int64_t rows, int64_t cols, int64_t r0, int64_t c0,
                               uint32_t tile[kTile][kTile / 2]) {
  for (int64_t i = 0; i < kTile; ++i) {
    __m512i* out = reinterpret_cast<__m512i*>(tile[i]);
    if (r0 + i >= rows) {
      out[0] = out[1] = _mm512_setzero_si512();
      continue;
    }
    const uint16_t* row = w + (r0 + i) * cols + c0;
    // The next tile's part of the row: 64 short runs far apart are too many
    // for the hardware prefetcher to follow.
    for (int64_t ahead = kTile; ahead < 2 * kTile && c0 + ahead < cols; ahead += 32) __builtin_prefetch(row + ahead);
    __m256i half[4];
    for (int q = 0; q < 4; ++q) {
      const int64_t valid = std::clamp<int64_t>(cols - c0 - 16 * q, 0, 16);
      half[q] = load_16(row + 16 * q, valid);
    }
    out[0] = _mm512_inserti64x4(_mm512_castsi256_si512(half[0]), half[1], 1);
    out[1] = _mm512_inserti64x4(_mm512_castsi256_si512(half[2]), half[3], 1);
  }
}

// A 64-byte row of a block: streamed where the copies are aligned.
template <bool kStream>
POSEIDON_AVX512 inline void store_line(uint16_t* at, __m512i v) {
  if constexpr (kStream)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(at), v);
  else
    _mm512_storeu_si512(at, v);
}

// W^T's block of K rows c0 + 32h .. (W's columns), N columns r0 .. r0 + 63
// (W's rows): pair p of the block's row n is word 16h + p of the tile's row
// n, so each 16 x 16 square of words is transposed into place.
template <bool kStream>
POSEIDON_AVX512 void store_transposed_block(uint32_t tile[kTile][kTile / 2], int h, uint16_t* block) {
  for (int64_t n0 = 0; n0 < kTile; n0 += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(reinterpret_cast<const float*>(&tile[n0 + i][16 * h]));
    transpose16(r);
    for (int p = 0; p < 16; ++p) store_line<kStream>(block + p * 128 + n0 * 2, _mm512_castps_si512(r[p]));
  }
}

// W's block of K rows r0 + 32h .. (W's rows), N columns c0 .. c0 + 63: pair
// p of column n is (tile row 32h + 2p, tile row 32h + 2p + 1) at column n.
template <bool kStream>
POSEIDON_AVX512 void store_block(uint32_t tile[kTile][kTile / 2], int h, uint16_t* block) {
  for (int p = 0; p < 16; ++p) {
    const uint16_t* low = reinterpret_cast<const uint16_t*>(tile[32 * h + 2 * p]);
    const uint16_t* high = reinterpret_cast<const uint16_t*>(tile[32 * h + 2 * p + 1]);
    for (int n0 = 0; n0 < kTile; n0 += 16) {
      const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + n0)));
      const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(high + n0)));
      store_line<kStream>(block + p * 128 + n0 * 2, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
}

template <bool kStream>
POSEIDON_AVX512 void pack(const uint16_t* w, int64_t rows, int64_t cols, uint16_t* w_t, uint16_t* w_plain) {
  const PackedB t{cols, rows}, plain{rows, cols};
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
#pragma omp parallel if (rows * cols > 65536)
  {
#pragma omp for collapse(2) schedule(static) nowait
    for (int64_t rt = 0; rt < row_tiles; ++rt)
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        alignas(64) uint32_t tile[kTile][kTile / 2];
        const int64_t r0 = rt * kTile, c0 = ct * kTile;
        load_tile(w, rows, cols, r0, c0, tile);
        for (int h = 0; h < 2; ++h) {
          // Half h of the tile exists in a layout only within its padded K.
          if (w_t && c0 + 32 * h < t.padded_k())
            store_transposed_block<kStream>(tile, h, w_t + t.offset(c0 + 32 * h, r0));
          if (w_plain && r0 + 32 * h < plain.padded_k())
            store_block<kStream>(tile, h, w_plain + plain.offset(r0 + 32 * h, c0));
        }
      }
    // Streaming stores are ordered only by a fence: before the threads meet,
    // so that whoever reads the copies next sees them whole.
    if constexpr (kStream) _mm_sfence();
  }
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

}  // namespace

bool bf16_pack_supported() {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu;
}

void pack_bf16_weights(const uint16_t* weights, int64_t rows, int64_t cols, uint16_t* w_t, uint16_t* w) {
  if (aligned(w_t) && aligned(w))  // a null copy counts as aligned
    pack<true>(weights, rows, cols, w_t, w);
  else
    pack<false>(weights, rows, cols, w_t, w);
}

#else

// Elsewhere the fc layer keeps oneDNN's own copies.
bool bf16_pack_supported() { return false; }
void pack_bf16_weights(const uint16_t*, int64_t, int64_t, uint16_t*, uint16_t*) {}

#endif

}  // namespace poseidon
