// The transforms of F(4x4, 3x3) on blocks of tiles (see winograd_tiles.h).
//
// With d a 6x6 input tile, g a 3x3 filter and Y a 4x4 output tile:
// V = B^T d B, U = G g G^T, Y = A^T (U . V) A, summed over input channels.
// Tile (ty, tx) reads padded rows 4ty .. 4ty + 5 and the same columns. The
// transforms work on blocks of consecutive tiles of one channel (whole rows
// of tiles, across images when the images are small): the tiles' elements
// are first gathered position by position into a buffer on the stack, so
// that each position's values are consecutive, then one loop over the block's tiles
// transforms them, reading and writing consecutive floats, compiled for AVX2
// and AVX-512 too (cpu_vector.h). The 2-D transforms apply the 1-D ones of
// Tile to the tile's rows, then to its columns.
#include "layers/winograd_tiles.h"

#include <algorithm>
#include <numeric>

#include "core/bf16.h"
#include "layers/block_product.h"
#include "layers/cpu_vector.h"

// The loops over tiles read and write distinct buffers: no dependence
// between iterations to prove before vectorising.
#if defined(__clang__)
#define POSEIDON_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#else
#define POSEIDON_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#endif

namespace poseidon::winograd {
namespace {

// The 1-D transforms of F(4x4, 3x3), interpolating at 0, +-3/4, +-3/2 and
// infinity (each function applies one matrix to a vector):
//   B^T = [81/64 0 -45/16 0 1 0; 0 -27/16 -9/4 3/4 1 0; 0 27/16 -9/4 -3/4 1 0;
//          0 -27/32 -9/16 3/2 1 0; 0 27/32 -9/16 -3/2 1 0; 0 81/64 0 -45/16 0 1],
//   G = [64/81 0 0; -128/243 -32/81 -8/27; -128/243 32/81 -8/27;
//        32/243 16/81 8/27; 32/243 -16/81 8/27; 0 0 1],
//   A^T = [1 1 1 1 1 0; 0 3/4 -3/4 3/2 -3/2 0; 0 9/16 9/16 9/4 9/4 0;
//          0 27/64 -27/64 27/8 -27/8 1].
// The usual points 0, +-1, +-2 give simpler constants but about twice the
// rounding error (bench/winograd_points.py: 11 to 12 times a direct sum's
// on random tiles summed over 32 to 128 channels, against 5.3 to 6.1);
// these cost the same operations, and all but G's constants are exact in
// binary.
struct Tile {
  static void input(const float* d, float* v) {  // B^T d
    const float e1 = d[4] - 2.25f * d[2], o1 = 0.75f * d[3] - 1.6875f * d[1];
    const float e2 = d[4] - 0.5625f * d[2], o2 = 1.5f * d[3] - 0.84375f * d[1];
    v[0] = 1.265625f * d[0] - 2.8125f * d[2] + d[4];
    v[1] = e1 + o1;
    v[2] = e1 - o1;
    v[3] = e2 + o2;
    v[4] = e2 - o2;
    v[5] = 1.265625f * d[1] - 2.8125f * d[3] + d[5];
  }
  static void output(const float* s, float* y) {  // A^T s
    const float p1 = s[1] + s[2], m1 = s[1] - s[2], p2 = s[3] + s[4], m2 = s[3] - s[4];
    y[0] = s[0] + p1 + p2;
    y[1] = 0.75f * m1 + 1.5f * m2;
    y[2] = 0.5625f * p1 + 2.25f * p2;
    y[3] = 0.421875f * m1 + 3.375f * m2 + s[5];
  }
  static void filter(const float* g, float* u) {  // G g
    const float a = -(128.f / 243.f * g[0] + 8.f / 27.f * g[2]), b = 32.f / 81.f * g[1];
    const float c = 32.f / 243.f * g[0] + 8.f / 27.f * g[2], e = 16.f / 81.f * g[1];
    u[0] = 64.f / 81.f * g[0];
    u[1] = a - b;
    u[2] = a + b;
    u[3] = c + e;
    u[4] = c - e;
    u[5] = g[2];
  }
  static void output_grad(const float* y, float* c) {  // A y
    const float e1 = y[0] + 0.5625f * y[2], o1 = 0.75f * y[1] + 0.421875f * y[3];
    const float e2 = y[0] + 2.25f * y[2], o2 = 1.5f * y[1] + 3.375f * y[3];
    c[0] = y[0];
    c[1] = e1 + o1;
    c[2] = e1 - o1;
    c[3] = e2 + o2;
    c[4] = e2 - o2;
    c[5] = y[3];
  }
  static void filter_grad(const float* d, float* e) {  // G^T d
    const float p1 = d[1] + d[2], m1 = d[1] - d[2], p2 = d[3] + d[4], m2 = d[3] - d[4];
    e[0] = 64.f / 81.f * d[0] - 128.f / 243.f * p1 + 32.f / 243.f * p2;
    e[1] = 16.f / 81.f * m2 - 32.f / 81.f * m1;
    e[2] = 8.f / 27.f * (p2 - p1) + d[5];
  }
};

// Floats from one position's tiles to the next in the stack buffers: a
// block's tiles and a cache line more.
constexpr int64_t kTileStride = kBlockTiles + kCacheLineFloats;

// What a bfloat16 kernel reads of a row of n floats: from[i] rounded to
// bfloat16, into to[i] (core/precision.h's round_to_bf16, without its
// threads, for rows of a few dozen floats, and compiled for AVX2 and
// AVX-512 too).
POSEIDON_VECTOR_CLONES void round_row_to_bf16(const float* from, float* to, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) to[i] = from_bf16(to_bf16(from[i]));
}

// The kCols columns of `tiles` tiles of one image row, padded by `pad`:
// d[j kTileStride + tx] = row[kM tx + j - pad] (rounded to bfloat16 with
// kRound), 0 outside [0, width); all 0 without a row (above or below the
// image).
template <int kCols, bool kRound = false>
inline void gather_columns(const float* row, int64_t width, int64_t pad, int64_t tiles, float* d) {
  if (!row) {
    for (int j = 0; j < kCols; ++j) std::fill_n(d + j * kTileStride, tiles, 0.f);
    return;
  }
  // The row with its padding, zeros as far as the last tile reads. The
  // padding on either side is at most kN floats: zeroed by bounded loops,
  // not by calls.
  float line[kMaxWidth + 2 * kN];
  const int64_t end = kM * (tiles - 1) + kCols, inside = std::min(width, end - pad);
  for (int i = 0; i < kN; ++i)
    if (i < pad) line[i] = 0.f;
  if (kRound)
    round_row_to_bf16(row, line + pad, inside);
  else
    std::copy_n(row, inside, line + pad);
  for (int i = 0; i < 2 * kN; ++i)
    if (pad + inside + i < end) line[pad + inside + i] = 0.f;
  for (int64_t tx = 0; tx < tiles; ++tx)
#pragma GCC unroll 8
    for (int j = 0; j < kCols; ++j) d[j * kTileStride + tx] = line[kM * tx + j];
}

// The input tiles' 6 columns (rounded to bfloat16 with `round`), and the
// output-gradient tiles' 4.
POSEIDON_VECTOR_CLONES void gather_input_row(const float* row, int64_t width, int64_t pad, int64_t tiles, bool round,
                                             float* d) {
  if (round)
    gather_columns<kN, true>(row, width, pad, tiles, d);
  else
    gather_columns<kN>(row, width, pad, tiles, d);
}
POSEIDON_VECTOR_CLONES void gather_grad_row(const float* row, int64_t width, int64_t tiles, float* d) {
  gather_columns<kM>(row, width, 0, tiles, d);
}

// Writes (or adds) row i of `width` outputs from tiles laid out as
// output_tiles leaves them (element (i, j) of tile tx at
// tiles[j kTileStride + tx]).
template <bool kAdd>
void scatter_row(const float* tiles, int64_t width, float* line) {
  const int64_t whole = width / kM;
  for (int64_t tx = 0; tx < whole; ++tx)
#pragma GCC unroll 8
    for (int j = 0; j < kM; ++j) {
      const float v = tiles[j * kTileStride + tx];
      line[kM * tx + j] = kAdd ? line[kM * tx + j] + v : v;
    }
  for (int64_t x = kM * whole; x < width; ++x) {
    const float v = tiles[(x - kM * whole) * kTileStride + whole];
    line[x] = kAdd ? line[x] + v : v;
  }
}

// T X T^T for `tiles` kIn x kIn tiles X, T the 1-D transform kApply from
// kIn values to kOut: element (i, j) of tile t lies at
// x[(i kIn + j) kTileStride + t], position (i, j) of its transform goes to
// out[(i kOut + j) step + t].
template <int kIn, int kOut, void (*kApply)(const float*, float*)>
inline void transform_tiles(const float* x, int64_t tiles, float* out, int64_t step) {
  POSEIDON_INDEPENDENT_ITERATIONS
  for (int64_t t = 0; t < tiles; ++t) {
    float rows[kIn][kOut];  // X T^T, row by row
#pragma GCC unroll 8
    for (int i = 0; i < kIn; ++i) {
      float row[kIn];
#pragma GCC unroll 8
      for (int j = 0; j < kIn; ++j) row[j] = x[(i * kIn + j) * kTileStride + t];
      kApply(row, rows[i]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < kOut; ++j) {
      float col[kIn], result[kOut];
#pragma GCC unroll 8
      for (int i = 0; i < kIn; ++i) col[i] = rows[i][j];
      kApply(col, result);
#pragma GCC unroll 8
      for (int i = 0; i < kOut; ++i) out[(i * kOut + j) * step + t] = result[i];
    }
  }
}

// V = B^T d B of input tiles, and A dY A^T of output-gradient tiles.
POSEIDON_VECTOR_CLONES void input_tiles(const float* d, int64_t tiles, float* v, int64_t step) {
  transform_tiles<kN, kN, Tile::input>(d, tiles, v, step);
}
POSEIDON_VECTOR_CLONES void output_grad_tiles(const float* dy, int64_t tiles, float* m, int64_t step) {
  transform_tiles<kM, kN, Tile::output_grad>(dy, tiles, m, step);
}

// Y = A^T M A (+ bias, then max(., 0) with kRelu) for `tiles` tiles of
// m[q step + t]; element (i, j) of tile t goes to y[(i kM + j) kTileStride + t].
template <bool kRelu>
inline void output_tiles_of(const float* m, int64_t step, int64_t tiles, float bias, float* y) {
  POSEIDON_INDEPENDENT_ITERATIONS
  for (int64_t t = 0; t < tiles; ++t) {
    float s[kM][kN];  // A^T M, column by column
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) {
      float col[kN], out[kM];
#pragma GCC unroll 8
      for (int i = 0; i < kN; ++i) col[i] = m[(i * kN + j) * step + t];
      Tile::output(col, out);
#pragma GCC unroll 8
      for (int i = 0; i < kM; ++i) s[i][j] = out[i];
    }
#pragma GCC unroll 8
    for (int i = 0; i < kM; ++i) {
      float out[kM];
      Tile::output(s[i], out);
#pragma GCC unroll 8
      for (int j = 0; j < kM; ++j) {
        const float v = out[j] + bias;
        y[(i * kM + j) * kTileStride + t] = kRelu ? (v > 0.f ? v : 0.f) : v;  // as the ReLU layer writes it (NaN to 0)
      }
    }
  }
}

POSEIDON_VECTOR_CLONES void output_tiles(const float* m, int64_t step, int64_t tiles, float bias, bool relu, float* y) {
  if (relu)
    output_tiles_of<true>(m, step, tiles, bias, y);
  else
    output_tiles_of<false>(m, step, tiles, bias, y);
}

// U = G g G^T for `count` filters, filter t's 3x3 at w[t stride] on (turned
// by 180 degrees with kRotate, rounded to bfloat16 with kRound); position q
// of filter t goes to u[q step + t].
template <bool kRotate, bool kRound>
inline void filter_tiles_of(const float* w, int64_t stride, int64_t count, float* u, int64_t step) {
  POSEIDON_INDEPENDENT_ITERATIONS
  for (int64_t t = 0; t < count; ++t) {
    float gg[3][kN];  // G g, column by column
#pragma GCC unroll 8
    for (int j = 0; j < 3; ++j) {
      float col[3];
#pragma GCC unroll 8
      for (int i = 0; i < 3; ++i) {
        const float g = w[t * stride + (kRotate ? (2 - i) * 3 + (2 - j) : i * 3 + j)];
        col[i] = kRound ? from_bf16(to_bf16(g)) : g;
      }
      Tile::filter(col, gg[j]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < kN; ++i) {
      const float row[3] = {gg[0][i], gg[1][i], gg[2][i]};
      float out[kN];
      Tile::filter(row, out);
#pragma GCC unroll 8
      for (int j = 0; j < kN; ++j) u[(i * kN + j) * step + t] = out[j];
    }
  }
}

// Rows of `tiles_w` tiles in a block of about `target` tiles: as many as fit,
// cut back to a whole number of block_product's panels, or else of its
// vectors, where that leaves a row (28 tiles of 16x16 images, 4 in a row,
// would leave 4 of 32 lanes unused; 24 fill one panel).
int64_t block_rows(int64_t tiles_w, int64_t target) {
  const int64_t rows = std::max<int64_t>(1, target / tiles_w);
  for (int64_t columns : {kBlockProductPanel, kBlockProductLanes}) {
    const int64_t step = columns / std::gcd(tiles_w, columns);  // rows that fill whole ones
    if (rows >= step) return rows / step * step;
  }
  return rows;
}

}  // namespace

POSEIDON_VECTOR_CLONES void filter_tiles(const float* w, int64_t stride, int64_t count, bool rotate, bool round,
                                         float* u, int64_t step) {
  if (rotate && round)
    filter_tiles_of<true, true>(w, stride, count, u, step);
  else if (rotate)
    filter_tiles_of<true, false>(w, stride, count, u, step);
  else if (round)
    filter_tiles_of<false, true>(w, stride, count, u, step);
  else
    filter_tiles_of<false, false>(w, stride, count, u, step);
}

POSEIDON_VECTOR_CLONES void filter_grad_tiles(const float* du, int64_t step, int64_t count, float* dw) {
  POSEIDON_INDEPENDENT_ITERATIONS
  for (int64_t t = 0; t < count; ++t) {
    float cols[kN][3];  // G^T dU, column by column
#pragma GCC unroll 8
    for (int j = 0; j < kN; ++j) {
      float col[kN];
#pragma GCC unroll 8
      for (int i = 0; i < kN; ++i) col[i] = du[(i * kN + j) * step + t];
      Tile::filter_grad(col, cols[j]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 3; ++i) {
      float row[kN], e[3];
#pragma GCC unroll 8
      for (int j = 0; j < kN; ++j) row[j] = cols[j][i];
      Tile::filter_grad(row, e);
#pragma GCC unroll 8
      for (int j = 0; j < 3; ++j) dw[t * 9 + i * 3 + j] = e[j];
    }
  }
}

TileRows::TileRows(int64_t tiles_h, int64_t tiles_w, int64_t count, int64_t target)
    : th(tiles_h), tw(tiles_w), rows(count * tiles_h), per_block(block_rows(tiles_w, target)) {}

void input_block(const Pass& p, const TileRows& r, const float* images, int64_t c, int64_t r0, int64_t r1, bool round,
                 float* v, int64_t step) {
  const int64_t plane = p.in_h * p.in_w;
  float d[kPositions][kTileStride];  // the block's tiles, position by position
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / r.th, ty = row % r.th, at = (row - r0) * r.tw;
    const float* image = images + (n * p.in + c) * plane;
    for (int i = 0; i < kN; ++i) {
      const int64_t y = kM * ty + i - p.pad_h;
      gather_input_row(y >= 0 && y < p.in_h ? image + y * p.in_w : nullptr, p.in_w, p.pad_w, r.tw, round,
                       d[i * kN] + at);
    }
  }
  input_tiles(d[0], (r1 - r0) * r.tw, v, step);
}

void output_block(const Pass& p, const TileRows& r, const float* m, int64_t step, int64_t k, int64_t r0, int64_t r1,
                  float bias, Store store, float* out) {
  const int64_t plane = p.out_h * p.out_w;
  float y[kM * kM][kTileStride];  // the block's output tiles, element by element
  output_tiles(m, step, (r1 - r0) * r.tw, bias, store == Store::overwrite_relu, y[0]);
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / r.th, ty = row % r.th, at = (row - r0) * r.tw;
    float* image = out + (n * p.out + k) * plane;
    for (int i = 0; i < kM && kM * ty + i < p.out_h; ++i) {
      float* line = image + (kM * ty + i) * p.out_w;
      if (store == Store::add)
        scatter_row<true>(y[i * kM] + at, p.out_w, line);
      else
        scatter_row<false>(y[i * kM] + at, p.out_w, line);
    }
  }
}

void output_grad_block(const Pass& p, const TileRows& r, const float* dy, int64_t k, int64_t r0, int64_t r1, float* m,
                       int64_t step) {
  const int64_t plane = p.out_h * p.out_w;
  float d[kM * kM][kTileStride];
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / r.th, ty = row % r.th, at = (row - r0) * r.tw;
    const float* image = dy + (n * p.out + k) * plane;
    for (int i = 0; i < kM; ++i) {
      const int64_t y = kM * ty + i;
      gather_grad_row(y < p.out_h ? image + y * p.out_w : nullptr, p.out_w, r.tw, d[i * kM] + at);
    }
  }
  output_grad_tiles(d[0], (r1 - r0) * r.tw, m, step);
}

}  // namespace poseidon::winograd
