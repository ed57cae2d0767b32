// Winograd convolution F(4x4, 3x3) on the CPU (see conv_winograd.h).
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
#include "layers/conv_winograd.h"

#include <omp.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/math.h"
#include "layers/block_product.h"
#include "layers/cpu_vector.h"

// The loops over tiles read and write distinct buffers: no dependence
// between iterations to prove before vectorising.
#if defined(__clang__)
#define POSEIDON_INDEPENDENT_ITERATIONS _Pragma("clang loop vectorize(assume_safety)")
#else
#define POSEIDON_INDEPENDENT_ITERATIONS _Pragma("GCC ivdep")
#endif

namespace poseidon {
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
  static constexpr int m = 4, n = 6;  // outputs and inputs per tile side
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

constexpr int kM = Tile::m, kN = Tile::n;
constexpr int kPositions = kN * kN;  // the transformed domain
// Widest image row (in and out): bounds the stack buffers.
constexpr int64_t kMaxWidth = 1024;
// Tiles per block: at least one row of tiles, else about kBlockTarget.
constexpr int64_t kBlockTiles = kMaxWidth / kM, kBlockTarget = 128;
// Floats from one position's tiles to the next in the stack buffers: a
// block's tiles and a cache line more, so that the 36 positions do not all
// fall into the same few sets of the first-level cache (a power of two apart
// they evict one another).
constexpr int64_t kCacheLineFloats = 16, kTileStride = kBlockTiles + kCacheLineFloats;
// Convolutions whose transformed filters hold at most kBlockFilterFloats
// (64 x 128 channels) run block by block: a block's transformed inputs and
// products (about kBlockFloats, half a MiB) stay in cache from transform to
// product to output. Larger filters, which every block would read again
// from memory, go through the batch in chunks with BLAS's products (which
// measured faster there: bench/conv_engines.sh, docs/BENCHMARKS.md).
constexpr int64_t kBlockFilterFloats = kPositions * 64 * 128, kBlockFloats = int64_t{1} << 17;

// Floats from one position to the next in transforms of `channels` rows of
// `tiles` tiles (heap buffers): a cache line more than the rows, as above.
int64_t padded_position(int64_t channels, int64_t tiles) { return channels * tiles + kCacheLineFloats; }

// The kCols columns of `tiles` tiles of one image row, padded by `pad`:
// d[j kTileStride + tx] = row[kM tx + j - pad], 0 outside [0, width); all 0
// without a row (above or below the image).
template <int kCols>
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
  std::copy_n(row, inside, line + pad);
  for (int i = 0; i < 2 * kN; ++i)
    if (pad + inside + i < end) line[pad + inside + i] = 0.f;
  for (int64_t tx = 0; tx < tiles; ++tx)
#pragma GCC unroll 8
    for (int j = 0; j < kCols; ++j) d[j * kTileStride + tx] = line[kM * tx + j];
}

// The input tiles' 6 columns, and the output-gradient tiles' 4.
POSEIDON_VECTOR_CLONES void gather_input_row(const float* row, int64_t width, int64_t pad, int64_t tiles, float* d) {
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

POSEIDON_VECTOR_CLONES void output_tiles(const float* m, int64_t step, int64_t tiles, float bias, bool relu,
                                         float* y) {
  if (relu)
    output_tiles_of<true>(m, step, tiles, bias, y);
  else
    output_tiles_of<false>(m, step, tiles, bias, y);
}

// U = G g G^T for `count` filters, filter t's 3x3 at w[t stride] on (turned
// by 180 degrees with kRotate); position q of filter t goes to u[q step + t].
template <bool kRotate>
inline void filter_tiles_of(const float* w, int64_t stride, int64_t count, float* u, int64_t step) {
POSEIDON_INDEPENDENT_ITERATIONS
  for (int64_t t = 0; t < count; ++t) {
    float gg[3][kN];  // G g, column by column
#pragma GCC unroll 8
    for (int j = 0; j < 3; ++j) {
      float col[3];
#pragma GCC unroll 8
      for (int i = 0; i < 3; ++i) col[i] = w[t * stride + (kRotate ? (2 - i) * 3 + (2 - j) : i * 3 + j)];
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

POSEIDON_VECTOR_CLONES void filter_tiles(const float* w, int64_t stride, int64_t count, bool rotate, float* u,
                                         int64_t step) {
  if (rotate)
    filter_tiles_of<true>(w, stride, count, u, step);
  else
    filter_tiles_of<false>(w, stride, count, u, step);
}

// dW = G^T dU G for `count` filters whose position q lies at du[q step + t];
// filter t's 3x3 goes to dw[9 t] on.
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

// A pass's tiles of `count` images, counted in rows of tiles (image n's row
// ty is n * tiles_h + ty), cut into blocks of whole rows of about `target`
// tiles (at least one row).
struct TileRows {
  int64_t th, tw, rows, per_block;
  TileRows(int64_t tiles_h, int64_t tiles_w, int64_t count, int64_t target)
      : th(tiles_h), tw(tiles_w), rows(count * tiles_h), per_block(block_rows(tiles_w, target)) {}
  int64_t blocks() const { return (rows + per_block - 1) / per_block; }
  int64_t block_tiles() const { return std::min(rows, per_block) * tw; }  // the most in a block
};

// Runs fn(c, r0, r1) for each block [r0, r1) of tile rows of each of
// `channels` channels, spread over the threads unless small.
template <class Fn>
void for_each_block(const TileRows& r, int64_t channels, int64_t floats, Fn fn) {
  const int64_t blocks = r.blocks();
#pragma omp parallel for collapse(2) if (floats > 32768)
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t b = 0; b < blocks; ++b) fn(c, b * r.per_block, std::min(r.rows, (b + 1) * r.per_block));
}

// V = B^T d B of channel c's tiles in tile rows [r0, r1) of `images`
// (the whole batch), position q of the block's tile t to v[q step + t].
void input_block(const winograd::Pass& p, const TileRows& r, const float* images, int64_t c, int64_t r0, int64_t r1,
                 float* v, int64_t step) {
  const int64_t plane = p.in_h * p.in_w;
  float d[kPositions][kTileStride];  // the block's tiles, position by position
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / r.th, ty = row % r.th, at = (row - r0) * r.tw;
    const float* image = images + (n * p.in + c) * plane;
    for (int i = 0; i < kN; ++i) {
      const int64_t y = kM * ty + i - p.pad_h;
      gather_input_row(y >= 0 && y < p.in_h ? image + y * p.in_w : nullptr, p.in_w, p.pad_w, r.tw, d[i * kN] + at);
    }
  }
  input_tiles(d[0], (r1 - r0) * r.tw, v, step);
}

// Y = A^T M A (+ bias) of output channel k's tiles in tile rows [r0, r1),
// position q of the block's tile t read from m[q step + t], stored into
// `out` (the whole batch) as `store` says.
void output_block(const winograd::Pass& p, const TileRows& r, const float* m, int64_t step, int64_t k, int64_t r0,
                  int64_t r1, float bias, winograd::Store store, float* out) {
  const int64_t plane = p.out_h * p.out_w;
  float y[kM * kM][kTileStride];  // the block's output tiles, element by element
  output_tiles(m, step, (r1 - r0) * r.tw, bias, store == winograd::Store::overwrite_relu, y[0]);
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / r.th, ty = row % r.th, at = (row - r0) * r.tw;
    float* image = out + (n * p.out + k) * plane;
    for (int i = 0; i < kM && kM * ty + i < p.out_h; ++i) {
      float* line = image + (kM * ty + i) * p.out_w;
      if (store == winograd::Store::add)
        scatter_row<true>(y[i * kM] + at, p.out_w, line);
      else
        scatter_row<false>(y[i * kM] + at, p.out_w, line);
    }
  }
}

// A dY A^T of output channel k's 4x4 tiles in tile rows [r0, r1) of dy (the
// whole batch), position q of the block's tile t to m[q step + t].
void output_grad_block(const winograd::Pass& p, const TileRows& r, const float* dy, int64_t k, int64_t r0, int64_t r1,
                       float* m, int64_t step) {
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

}  // namespace

bool WinogradConv::covers(const ConvGeometry& g, int64_t groups) {
  return groups == 1 && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.pad_h <= 2 && g.pad_w <= 2 && g.fits() && g.width <= kMaxWidth &&
         g.out_width() <= kMaxWidth;
}

int64_t winograd::Pass::tiles_h() const { return (out_h + kM - 1) / kM; }
int64_t winograd::Pass::tiles_w() const { return (out_w + kM - 1) / kM; }

WinogradConv::WinogradConv(const WinogradShape& s) : shape_(s) {
  const int64_t out_h = s.height + 2 * s.pad_h - 2, out_w = s.width + 2 * s.pad_w - 2;
  forward_ = {.in = s.in_channels,
              .out = s.out_channels,
              .in_h = s.height,
              .in_w = s.width,
              .pad_h = s.pad_h,
              .pad_w = s.pad_w,
              .out_h = out_h,
              .out_w = out_w};
  data_grad_ = {.in = s.out_channels,
                .out = s.in_channels,
                .in_h = out_h,
                .in_w = out_w,
                .pad_h = 2 - s.pad_h,
                .pad_w = 2 - s.pad_w,
                .out_h = s.height,
                .out_w = s.width};
  filter_step_ = padded_position(s.out_channels, s.in_channels);
  u_.resize(kPositions * filter_step_);
  du_.resize(u_.size());
  blocks_ = kPositions * s.in_channels * s.out_channels <= kBlockFilterFloats;
  if (!blocks_) {
    const int64_t channels = std::max(s.in_channels, s.out_channels);
    const int64_t tiles = std::max(forward_.tiles(), data_grad_.tiles());
    chunk_ = images_per_chunk(2 * kPositions * channels * tiles, s.batch);
    v_.resize(kPositions * padded_position(channels, tiles * chunk_));
    m_.resize(v_.size());
    return;
  }
  // At least a vector's worth of tiles; at most what the transforms' stack
  // buffers hold.
  block_tiles_ = std::clamp<int64_t>(kBlockFloats / (kPositions * (s.in_channels + s.out_channels)), 8, kBlockTiles);
  for (const Pass* p : {&forward_, &data_grad_})
    width_ = std::max(width_, whole_block_product_lanes(TileRows(p->tiles_h(), p->tiles_w(), s.batch, block_tiles_).block_tiles()));
  const int64_t in_lanes = whole_block_product_lanes(s.in_channels);
  scratch_stride_ = kPositions * (position_floats(s.in_channels) + position_floats(s.out_channels)) +
                    width_ * in_lanes + kPositions * s.out_channels * in_lanes;
  scratch_threads_ = omp_get_max_threads();
  scratch_.resize(scratch_stride_ * scratch_threads_);
}

void WinogradConv::transform_filters(const float* w, bool rotate) {
  const int64_t out = shape_.out_channels, in = shape_.in_channels, step = filter_step_;
  if (rotate) {  // u_[q][c][k]: the filters of input channel c, consecutive in k
#pragma omp parallel for if (out * in > 4096)
    for (int64_t c = 0; c < in; ++c) filter_tiles(w + c * 9, in * 9, out, true, u_.data() + c * out, step);
  } else {  // u_[q][k][c]
#pragma omp parallel for if (out * in > 4096)
    for (int64_t k = 0; k < out; ++k) filter_tiles(w + k * in * 9, 9, in, false, u_.data() + k * in, step);
  }
}

void WinogradConv::transform_input(const Pass& p, const float* images, int64_t count, float* v) const {
  const TileRows r(p.tiles_h(), p.tiles_w(), count, kBlockTarget);
  const int64_t total = r.rows * r.tw;
  for_each_block(r, p.in, count * p.in * p.in_h * p.in_w, [&](int64_t c, int64_t r0, int64_t r1) {
    input_block(p, r, images, c, r0, r1, v + c * total + r0 * r.tw, padded_position(p.in, total));
  });
}

void WinogradConv::transform_output(const Pass& p, const float* m, int64_t count, const float* bias, float* out,
                                    Store store) const {
  const TileRows r(p.tiles_h(), p.tiles_w(), count, kBlockTarget);
  const int64_t total = r.rows * r.tw;
  for_each_block(r, p.out, count * p.out * p.out_h * p.out_w, [&](int64_t k, int64_t r0, int64_t r1) {
    output_block(p, r, m + k * total + r0 * r.tw, padded_position(p.out, total), k, r0, r1, bias ? bias[k] : 0.f, store,
                 out);
  });
}

void WinogradConv::transform_output_grad(const Pass& p, const float* dy, int64_t count, float* m) const {
  const TileRows r(p.tiles_h(), p.tiles_w(), count, kBlockTarget);
  const int64_t total = r.rows * r.tw;
  for_each_block(r, p.out, count * p.out * p.out_h * p.out_w, [&](int64_t k, int64_t r0, int64_t r1) {
    output_grad_block(p, r, dy, k, r0, r1, m + k * total + r0 * r.tw, padded_position(p.out, total));
  });
}

void WinogradConv::convolve(const Pass& p, const float* in, const float* b, float* out, Store store) {
  if (blocks_) return convolve_blocks(p, in, b, out, store);
  for (int64_t n0 = 0; n0 < shape_.batch; n0 += chunk_) {
    const int64_t count = std::min(chunk_, shape_.batch - n0), total = count * p.tiles();
    transform_input(p, in + n0 * p.in * p.in_h * p.in_w, count, v_.data());
    for (int q = 0; q < kPositions; ++q)
      gemm(false, false, p.out, total, p.in, 1.f, u_.data() + q * filter_step_,
           v_.data() + q * padded_position(p.in, total), 0.f, m_.data() + q * padded_position(p.out, total));
    transform_output(p, m_.data(), count, b, out + n0 * p.out * p.out_h * p.out_w, store);
  }
}

int64_t WinogradConv::position_floats(int64_t channels) const { return padded_position(channels, width_); }

int WinogradConv::block_threads(int64_t blocks) const {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({scratch_threads_, omp_get_max_threads(), blocks})));
}

void WinogradConv::convolve_blocks(const Pass& p, const float* in, const float* b, float* out, Store store) {
  const TileRows r(p.tiles_h(), p.tiles_w(), shape_.batch, block_tiles_);
  const int64_t blocks = r.blocks();
#pragma omp parallel num_threads(block_threads(blocks))
  {
    const int64_t v_step = position_floats(p.in), m_step = position_floats(p.out);
    float* v = scratch_.data() + omp_get_thread_num() * scratch_stride_;  // [36][in][width_]
    float* m = v + kPositions * v_step;                                   // [36][out][width_]
#pragma omp for schedule(static)
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t r0 = i * r.per_block, r1 = std::min(r.rows, r0 + r.per_block);
      const int64_t cols = whole_block_product_lanes((r1 - r0) * r.tw);
      for (int64_t c = 0; c < p.in; ++c) input_block(p, r, in, c, r0, r1, v + c * width_, v_step);
      for (int q = 0; q < kPositions; ++q)
        block_product(u_.data() + q * filter_step_, p.in, p.out, p.in, v + q * v_step, width_, cols, m + q * m_step,
                      width_, false);
      for (int64_t k = 0; k < p.out; ++k)
        output_block(p, r, m + k * width_, m_step, k, r0, r1, b ? b[k] : 0.f, store, out);
    }
  }
}

void WinogradConv::filter_grad_chunks(const float* x, const float* dy) {
  const Pass& p = forward_;
  const int64_t in = p.in, out = p.out;
  for (int64_t n0 = 0; n0 < shape_.batch; n0 += chunk_) {
    const int64_t count = std::min(chunk_, shape_.batch - n0), total = count * p.tiles();
    transform_input(p, x + n0 * in * p.in_h * p.in_w, count, v_.data());
    transform_output_grad(p, dy + n0 * out * p.out_h * p.out_w, count, m_.data());
    for (int q = 0; q < kPositions; ++q)
      gemm(false, true, out, in, total, 1.f, m_.data() + q * padded_position(out, total),
           v_.data() + q * padded_position(in, total), n0 == 0 ? 0.f : 1.f, du_.data() + q * filter_step_);
  }
}

// Each thread sums its blocks' [out, tiles] x [tiles, in] products into a
// filter gradient of its own (rows padded to whole vectors); du_ is their sum.
void WinogradConv::filter_grad_blocks(const float* x, const float* dy) {
  const Pass& p = forward_;
  const int64_t in = p.in, out = p.out, in_lanes = whole_block_product_lanes(in);
  const TileRows r(p.tiles_h(), p.tiles_w(), shape_.batch, block_tiles_);
  const int64_t blocks = r.blocks();
  int threads = 1;  // as many as the team holds
  auto thread_du = [&](int t) { return scratch_.data() + t * scratch_stride_ + scratch_stride_ - kPositions * out * in_lanes; };
#pragma omp parallel num_threads(block_threads(blocks))
  {
#pragma omp single nowait
    threads = omp_get_num_threads();
    const int64_t v_step = position_floats(in), m_step = position_floats(out);
    float* v = scratch_.data() + omp_get_thread_num() * scratch_stride_;  // [36][in][width_]
    float* m = v + kPositions * v_step;                                   // [36][out][width_]
    float* vt = m + kPositions * m_step;                                  // [width_][in_lanes]
    float* du = thread_du(omp_get_thread_num());                          // [36][out][in_lanes]
    std::fill_n(du, kPositions * out * in_lanes, 0.f);
    std::fill_n(vt, width_ * in_lanes, 0.f);  // the padding columns stay 0
#pragma omp for schedule(static)
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t r0 = i * r.per_block, r1 = std::min(r.rows, r0 + r.per_block), tiles = (r1 - r0) * r.tw;
      for (int64_t c = 0; c < in; ++c) input_block(p, r, x, c, r0, r1, v + c * width_, v_step);
      for (int64_t k = 0; k < out; ++k) output_grad_block(p, r, dy, k, r0, r1, m + k * width_, m_step);
      for (int q = 0; q < kPositions; ++q) {
        transpose_block(v + q * v_step, width_, in, tiles, vt, in_lanes);
        block_product(m + q * m_step, width_, out, tiles, vt, in_lanes, in_lanes, du + q * out * in_lanes, in_lanes,
                      true);
      }
    }
  }
#pragma omp parallel for if (kPositions * out * in > 32768)
  for (int64_t row = 0; row < kPositions * out; ++row)
    for (int64_t c = 0; c < in; ++c) {
      float sum = 0.f;
      for (int t = 0; t < threads; ++t) sum += thread_du(t)[row * in_lanes + c];
      du_[row / out * filter_step_ + row % out * in + c] = sum;
    }
}

void WinogradConv::forward(const float* x, const float* w, const float* b, float* y) {
  transform_filters(w, false);
  convolve(forward_, x, shape_.bias ? b : nullptr, y, shape_.relu ? Store::overwrite_relu : Store::overwrite);
}

void WinogradConv::backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                            bool overwrite_dx) {
  const int64_t in = shape_.in_channels, out = shape_.out_channels, out_plane = forward_.out_h * forward_.out_w;
  if (blocks_)
    filter_grad_blocks(x, dy);
  else
    filter_grad_chunks(x, dy);
#pragma omp parallel for if (out * in > 4096)
  for (int64_t k = 0; k < out; ++k) filter_grad_tiles(du_.data() + k * in, filter_step_, in, dw + k * in * 9);
  if (shape_.bias) {
#pragma omp parallel for if (shape_.batch * out * out_plane > 32768)
    for (int64_t k = 0; k < out; ++k) {
      float sum = 0.f;
      for (int64_t n = 0; n < shape_.batch; ++n) {
        const float* image = dy + (n * out + k) * out_plane;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < out_plane; ++i) sum += image[i];
      }
      db[k] = sum;
    }
  }
  if (!dx) return;
  transform_filters(w, true);
  convolve(data_grad_, dy, nullptr, dx, overwrite_dx ? Store::overwrite : Store::add);
}

}  // namespace poseidon
