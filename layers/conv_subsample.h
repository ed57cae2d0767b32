// A strided 1x1 convolution without padding reads one input pixel in
// stride_h * stride_w; oneDNN's kernels for it still reorder and write the
// whole input (and its gradient) in their layouts. The conv layer instead
// convolves a copy of the pixels it reads at stride 1, and scatters the copy's
// gradient back. resnet_small's two projection shortcuts in bf16 (batch 64,
// 2 threads, two runs each, `poseidon time`): backward 3.4-3.6 -> 2.5-2.6 ms
// and 1.9-2.5 -> 1.2-1.8 ms, forward unchanged.
#pragma once

#include <cstdint>

namespace poseidon {

// Pixels of each of `planes` NCHW planes of height x width read by a
// convolution of 1x1 kernel, no padding and this stride.
struct SubsampleShape {
  int64_t planes, height, width, stride_h, stride_w;
  int64_t out_height() const { return (height - 1) / stride_h + 1; }
  int64_t out_width() const { return (width - 1) / stride_w + 1; }
};

// sub[p][y][x] = full[p][y * stride_h][x * stride_w].
void subsample_pixels(const float* full, const SubsampleShape& s, float* sub);

// The inverse for a gradient: full[p][y * stride_h][x * stride_w] +=
// sub[p][y][x]; with overwrite, those are set instead and every other pixel
// of full is set to 0.
void scatter_pixels(const float* sub, const SubsampleShape& s, float* full, bool overwrite);

}  // namespace poseidon
