// Winograd convolution F(4x4, 3x3) on the CPU (see conv_winograd.h): the
// schedule of the passes, block by block through block_product or in chunks
// of images through BLAS. The transforms themselves are winograd_tiles.h's.
#include "layers/conv_winograd.h"

#include <omp.h>

#include <algorithm>

#include "core/error.h"
#include "core/math.h"
#include "layers/block_product.h"
#include "layers/winograd_tiles.h"

namespace poseidon {

using namespace winograd;

namespace {

// Convolutions whose transformed filters hold at most kBlockFilterFloats
// (64 x 128 channels) run block by block: a block's transformed inputs and
// products (about kBlockFloats, half a MiB) stay in cache from transform to
// product to output. Larger filters, which every block would read again
// from memory, go through the batch in chunks with BLAS's products (which
// measured faster there: bench/conv_engines.sh, docs/BENCHMARK_HISTORY.md).
constexpr int64_t kBlockFilterFloats = kPositions * 64 * 128, kBlockFloats = int64_t{1} << 17;

// Runs fn(c, r0, r1) for each block [r0, r1) of tile rows of each of
// `channels` channels, spread over the threads unless small.
template <class Fn>
void for_each_block(const TileRows& r, int64_t channels, int64_t floats, Fn fn) {
  const int64_t blocks = r.blocks();
#pragma omp parallel for collapse(2) if (floats > 32768)
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t b = 0; b < blocks; ++b) fn(c, b * r.per_block, std::min(r.rows, (b + 1) * r.per_block));
}

}  // namespace

bool WinogradConv::covers(const ConvGeometry& g, int64_t groups) {
  return groups == 1 && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.pad_h <= 2 && g.pad_w <= 2 && g.fits() && g.width <= kMaxWidth &&
         g.out_width() <= kMaxWidth;
}

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
    width_ = std::max(
        width_, whole_block_product_lanes(TileRows(p->tiles_h(), p->tiles_w(), s.batch, block_tiles_).block_tiles()));
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
    for (int64_t c = 0; c < in; ++c)
      filter_tiles(w + c * 9, in * 9, out, true, shape_.bf16_operands, u_.data() + c * out, step);
  } else {  // u_[q][k][c]
#pragma omp parallel for if (out * in > 4096)
    for (int64_t k = 0; k < out; ++k)
      filter_tiles(w + k * in * 9, 9, in, false, shape_.bf16_operands, u_.data() + k * in, step);
  }
}

void WinogradConv::transform_input(const Pass& p, const float* images, int64_t count, bool round, float* v) const {
  const TileRows r(p.tiles_h(), p.tiles_w(), count, kBlockTarget);
  const int64_t total = r.rows * r.tw;
  for_each_block(r, p.in, count * p.in * p.in_h * p.in_w, [&](int64_t c, int64_t r0, int64_t r1) {
    input_block(p, r, images, c, r0, r1, round, v + c * total + r0 * r.tw, padded_position(p.in, total));
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

void WinogradConv::convolve(const Pass& p, const float* in, bool round, const float* b, float* out, Store store) {
  if (blocks_) return convolve_blocks(p, in, round, b, out, store);
  for (int64_t n0 = 0; n0 < shape_.batch; n0 += chunk_) {
    const int64_t count = std::min(chunk_, shape_.batch - n0), total = count * p.tiles();
    transform_input(p, in + n0 * p.in * p.in_h * p.in_w, count, round, v_.data());
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

void WinogradConv::convolve_blocks(const Pass& p, const float* in, bool round, const float* b, float* out,
                                   Store store) {
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
      for (int64_t c = 0; c < p.in; ++c) input_block(p, r, in, c, r0, r1, round, v + c * width_, v_step);
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
    transform_input(p, x + n0 * in * p.in_h * p.in_w, count, shape_.bf16_operands, v_.data());
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
  auto thread_du = [&](int t) {
    return scratch_.data() + t * scratch_stride_ + scratch_stride_ - kPositions * out * in_lanes;
  };
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
      for (int64_t c = 0; c < in; ++c) input_block(p, r, x, c, r0, r1, shape_.bf16_operands, v + c * width_, v_step);
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
  convolve(forward_, x, shape_.bf16_operands, shape_.bias ? b : nullptr, y,
           shape_.relu ? Store::overwrite_relu : Store::overwrite);
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
  convolve(data_grad_, dy, false, nullptr, dx, overwrite_dx ? Store::overwrite : Store::add);
}

}  // namespace poseidon
