// im2col and col2im: unroll the receptive fields of convolution windows into
// matrix columns so that a convolution is one large GEMM on the CPU. Columns of
// several images sit side by side in one buffer, so the GEMM is as wide as a
// whole chunk of the batch rather than one image.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/config_node.h"

namespace poseidon {

// A 2-D window (convolution kernel) sliding over one CHW image.
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;

  // Span of the dilated kernel in input pixels.
  int64_t extent_h() const { return dilation_h * (kernel_h - 1) + 1; }
  int64_t extent_w() const { return dilation_w * (kernel_w - 1) + 1; }
  // Whether the dilated kernel fits inside the padded input at least once.
  bool fits() const { return extent_h() <= height + 2 * pad_h && extent_w() <= width + 2 * pad_w; }
  // floor((H + 2p - d*(k-1) - 1) / s) + 1; meaningful only when fits().
  int64_t out_height() const { return (height + 2 * pad_h - extent_h()) / stride_h + 1; }
  int64_t out_width() const { return (width + 2 * pad_w - extent_w()) / stride_w + 1; }
  int64_t image_size() const { return channels * height * width; }
  int64_t col_rows() const { return channels * kernel_h * kernel_w; }
  int64_t col_cols() const { return out_height() * out_width(); }  // per image
};

// Outputs [lo, hi) of a window sliding over `size` inputs (with `pad` before
// them) whose tap at offset `tap` reads a real input, not padding.
struct OutputSpan {
  int64_t lo, hi;
};
OutputSpan outputs_reading_input(int64_t size, int64_t pad, int64_t stride, int64_t tap, int64_t outputs);

// Writes the columns of `count` consecutive CHW images into `col`, a row-major
// [channels*kernel_h*kernel_w, count*out_h*out_w] matrix: row (c, i, j) and
// column (image, y, x) hold the pixel under kernel tap (i, j) of output (y, x),
// or 0 where the tap falls into the padding.
void im2col(const float* images, int64_t count, const ConvGeometry& g, float* col);

// The adjoint of im2col: adds every entry of `col` onto the pixel it was read
// from (padding taps are dropped). `images` is accumulated into, not cleared.
void col2im_add(const float* col, int64_t count, const ConvGeometry& g, float* images);

// Column buffers are bounded to this many floats (32 MiB): large enough for
// GEMMs that run near peak, small enough to stay cheap in memory.
inline constexpr int64_t kColumnBudget = int64_t{8} << 20;

// How many of `images` images to unroll at once when each needs
// `floats_per_image` floats of buffer: at least one, at most all of them.
int64_t images_per_chunk(int64_t floats_per_image, int64_t images);

// Reads a per-dimension key ("kernel_size: 3" or "kernel_size: [3, 5]") as
// {height, width}; `fallback` when the key is absent. Values below `minimum`
// and lists of other lengths fail with a message naming the key.
std::array<int64_t, 2> read_hw(const ConfigNode& config, const std::string& key, std::array<int64_t, 2> fallback,
                               int64_t minimum);

}  // namespace poseidon
