// The Winograd engine's arithmetic on tiles (see conv_winograd.h): the
// transforms of F(4x4, 3x3) applied to blocks of tiles, gathered from image
// rows and scattered back to them, and to the filters. Each buffer that holds
// the 36 positions of the transformed domain puts a cache line between one
// position and the next: the transforms walk all 36 at once, and whole rows
// apart they would often be a power of two apart, fall into the same few
// sets of the first-level cache and evict one another.
#pragma once

#include <algorithm>
#include <cstdint>

namespace poseidon::winograd {

constexpr int kM = 4, kN = 6;        // outputs and inputs per tile side
constexpr int kPositions = kN * kN;  // the transformed domain
// Widest image row (in and out): bounds the stack buffers.
constexpr int64_t kMaxWidth = 1024;
// Tiles per block: at least one row of tiles, else about kBlockTarget.
constexpr int64_t kBlockTiles = kMaxWidth / kM, kBlockTarget = 128;
constexpr int64_t kCacheLineFloats = 16;

// One direction of the convolution: `in` channels of in_h x in_w images,
// padded by pad_h, pad_w, to `out` channels of out_h x out_w.
struct Pass {
  int64_t in = 0, out = 0, in_h = 0, in_w = 0, pad_h = 0, pad_w = 0, out_h = 0, out_w = 0;
  int64_t tiles_h() const { return (out_h + kM - 1) / kM; }  // rows of output tiles
  int64_t tiles_w() const { return (out_w + kM - 1) / kM; }
  int64_t tiles() const { return tiles_h() * tiles_w(); }  // per image
};

// How the output transform writes its result.
enum class Store { overwrite, add, overwrite_relu };

// Floats from one position to the next in transforms of `channels` rows of
// `tiles` tiles: the rows and a cache line more.
constexpr int64_t padded_position(int64_t channels, int64_t tiles) { return channels * tiles + kCacheLineFloats; }

// A pass's tiles of `count` images, counted in rows of tiles (image n's row
// ty is n * tiles_h + ty), cut into blocks of whole rows of about `target`
// tiles (at least one row; whole panels or vectors of block_product's
// columns where the rows allow).
struct TileRows {
  int64_t th, tw, rows, per_block;
  TileRows(int64_t tiles_h, int64_t tiles_w, int64_t count, int64_t target);
  int64_t blocks() const { return (rows + per_block - 1) / per_block; }
  int64_t block_tiles() const { return std::min(rows, per_block) * tw; }  // the most in a block
};

// V = B^T d B of channel c's tiles in tile rows [r0, r1) of `images`
// (the whole batch), position q of the block's tile t to v[q step + t]; with
// `round` d holds the images' values rounded to bfloat16 (what a bfloat16
// kernel multiplies), the images themselves unchanged.
void input_block(const Pass& p, const TileRows& r, const float* images, int64_t c, int64_t r0, int64_t r1, bool round,
                 float* v, int64_t step);

// Y = A^T M A (+ bias) of output channel k's tiles in tile rows [r0, r1),
// position q of the block's tile t read from m[q step + t], stored into
// `out` (the whole batch) as `store` says.
void output_block(const Pass& p, const TileRows& r, const float* m, int64_t step, int64_t k, int64_t r0, int64_t r1,
                  float bias, Store store, float* out);

// A dY A^T of output channel k's 4x4 tiles in tile rows [r0, r1) of dy (the
// whole batch), position q of the block's tile t to m[q step + t].
void output_grad_block(const Pass& p, const TileRows& r, const float* dy, int64_t k, int64_t r0, int64_t r1, float* m,
                       int64_t step);

// U = G g G^T for `count` filters, filter t's 3x3 at w[t stride] on (turned
// by 180 degrees with `rotate`, rounded to bfloat16 with `round`); position q
// of filter t goes to u[q step + t].
void filter_tiles(const float* w, int64_t stride, int64_t count, bool rotate, bool round, float* u, int64_t step);

// dW = G^T dU G for `count` filters whose position q lies at du[q step + t];
// filter t's 3x3 goes to dw[9 t] on.
void filter_grad_tiles(const float* du, int64_t step, int64_t count, float* dw);

}  // namespace poseidon::winograd
