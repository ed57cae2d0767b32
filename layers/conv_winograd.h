// The conv layer's Winograd engine: 3x3 convolutions at stride 1 as Winograd's
// minimal filtering F(4x4, 3x3). Each 6x6 input tile and each 3x3 filter move
// into a 6x6 transformed domain where the convolution is an element-wise
// product, summed over channels: for each of the 36 positions one matrix
// product [out, in] x [in, tiles]. That is 36 multiply-adds per 4x4 outputs
// and input channel instead of the direct kernel's 144 (4x fewer), at the
// cost of the transforms, passes over memory, and of rounding errors about
// five times a direct sum's. oneDNN's Winograd kernels need AVX-512; on CPUs
// where its convolutions stop at AVX2 this engine runs instead, where it
// measured faster than oneDNN's direct convolution (conv.cpp).
//
// Backward runs the same way: the input gradient is a Winograd convolution
// of dy with the filters rotated by 180 degrees and in/out swapped; the
// filter gradient is, per position, [out, tiles] x [tiles, in] between the
// transformed output gradient (A dY A^T) and the transformed input, moved
// back to 3x3 by G^T dU G.
//
// Float32 arithmetic; in bf16 (bf16_operands) on operands rounded to
// bfloat16 as the transforms read them. With filters of up to 64 x 128
// channels the batch goes through in blocks of tiles: each thread
// transforms a block of all channels, multiplies it with block_product.h's
// register-blocked product and transforms it back while it is still in
// cache. Wider filters, which each block would read again, go through in
// chunks of images whose transformed tiles fit a bounded buffer
// (core/im2col.h's budget), with BLAS's products (core/math.h) over the
// whole chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "core/im2col.h"
#include "layers/winograd_tiles.h"

namespace poseidon {

// A 3x3, stride-1, undilated, ungrouped convolution's shape.
struct WinogradShape {
  int64_t batch = 1, in_channels = 1, out_channels = 1, height = 1, width = 1;
  int64_t pad_h = 0, pad_w = 0;  // 0, 1 or 2
  bool bias = true;
  bool relu = false;  // forward writes max(y, 0)
  // Multiplies x and w rounded to bfloat16, as it reads them (x and w stay
  // as they are): `precision: bf16` where no bfloat16 kernel runs the layer.
  // dy is the caller's to round.
  bool bf16_operands = false;
};

class WinogradConv {
 public:
  // Whether a convolution of this geometry and grouping can run here (not
  // whether it should: conv.cpp decides that).
  static bool covers(const ConvGeometry& g, int64_t groups);

  explicit WinogradConv(const WinogradShape& shape);

  // y = conv(x, w) + b (max(that, 0) with relu); b ignored without bias.
  void forward(const float* x, const float* w, const float* b, float* y);
  // dw and db (with bias) are overwritten; dx, when not null, is added to
  // or, with overwrite_dx, overwritten.
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, bool overwrite_dx);

 private:
  using Pass = winograd::Pass;
  using Store = winograd::Store;

  // Runs `pass` over the batch: transforms of images [n0, n0 + chunk) into
  // v_ (of `in` rounded to bfloat16 with `round`), 36 products with u_
  // (filters transformed as [36][out][in]) into m_, then the output
  // transform into `out` (bias b, when not null, added).
  void convolve(const Pass& pass, const float* in, bool round, const float* b, float* out, Store store);
  // The same, block by block (blocks_): each thread transforms a block of
  // tiles of all input channels into its scratch, multiplies them with
  // block_product and transforms the block's products out.
  void convolve_blocks(const Pass& pass, const float* in, bool round, const float* b, float* out, Store store);
  // du_ from x and dy, in chunks with BLAS or block by block.
  void filter_grad_chunks(const float* x, const float* dy);
  void filter_grad_blocks(const float* x, const float* dy);
  // Threads for a loop over `blocks` blocks: no more than have scratch.
  int block_threads(int64_t blocks) const;
  // Floats from one position to the next in a block's transforms of
  // `channels` channels: whole rows of width_ and a cache line more, for the
  // same reason as the transforms' stack buffers (winograd_tiles.h).
  int64_t position_floats(int64_t channels) const;
  void transform_input(const Pass& pass, const float* images, int64_t count, bool round, float* v) const;
  void transform_output(const Pass& pass, const float* m, int64_t count, const float* b, float* out, Store store) const;
  // A dY A^T of each 4x4 tile of `count` output-gradient images, [36][out][tiles].
  void transform_output_grad(const Pass& pass, const float* dy, int64_t count, float* m) const;
  // u_[36][rows][cols] from w [out][in][3][3]: rows are the output channels,
  // or with `rotate` the input ones and the filter turned by 180 degrees.
  void transform_filters(const float* w, bool rotate);

  WinogradShape shape_;
  Pass forward_, data_grad_;
  int64_t chunk_ = 1;         // images per chunk
  int64_t filter_step_ = 0;   // floats from one position of u_ and du_ to the next
  std::vector<float> u_;      // [36][rows][cols] transformed filters
  std::vector<float> v_, m_;  // transformed inputs [36][in][tiles], products [36][out][tiles]
  std::vector<float> du_;     // [36][out][in] filter gradient, transformed
  bool blocks_ = false;       // the block-by-block schedule
  int64_t block_tiles_ = 0;   // tiles per block there
  int64_t width_ = 0;         // a block's tiles, padded to whole vectors
  int64_t scratch_stride_ = 0;
  int scratch_threads_ = 1;
  // Per thread: a block's transforms [36][in][width_] and [36][out][width_]
  // (positions position_floats apart), one position's [width_][in] and a
  // filter gradient [36][out][in].
  std::vector<float> scratch_;
};

}  // namespace poseidon
