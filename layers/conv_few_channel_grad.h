// The weight gradient of a stride-1 convolution over an input of a few
// channels (a network's first layer: a grey or RGB image),
//   dw[o][c][i][j] = sum over n, y, x of dy[n][o][y][x] * xp[n][c][y + i][x + j]
// with xp the input padded by pad_h, pad_w. oneDNN's AVX2 kernel for this
// pads one channel to a block of 8 and multiplies by the zeros, and its GEMM
// path unfolds the input for a product whose result is a few hundred floats.
// Here each dw element is one long dot product: blocks of 4 outputs x 3
// kernel columns stay in registers while the rows of dy and x stream past.
// `poseidon time` per layer (AVX2, 2 threads, batch 64), backward of the
// first layer, oneDNN -> this: models/lenet.yaml (1 channel, 28x28, 5x5 to
// 20) 4.7 to 5.4 ms -> 0.8; vgg_small (3 channels, 32x32, 3x3 to 64) 6.8 to
// 6.9 -> 4.5 to 4.6; cifar10_quick (3, 32x32, 5x5 to 32) 4.7 to 4.8 -> 4.0
// to 4.5 (docs/BENCHMARK_HISTORY.md).
#pragma once

#include <cstdint>
#include <vector>

#include "core/im2col.h"

namespace poseidon {

class FewChannelWeightGrad {
 public:
  // Float32 convolutions this class computes: ungrouped, stride 1, no
  // dilation, at most kMaxChannels input channels.
  static constexpr int64_t kMaxChannels = 3;
  static bool suits(const ConvGeometry& g, int64_t groups);

  FewChannelWeightGrad(const ConvGeometry& g, int64_t batch, int64_t num_output);

  // dw [num_output, channels, kernel_h, kernel_w] = the sum above, from x
  // [batch, channels, height, width] and dy [batch, num_output, out_height,
  // out_width], all NCHW float32; and where db is given, db[o] = the sum of
  // dy[n][o][y][x]. Each element sums its terms in the same order whatever
  // the thread count.
  void run(const float* x, const float* dy, float* dw, float* db);

 private:
  ConvGeometry g_;
  int64_t batch_, outputs_;
  int64_t output_blocks_, column_blocks_, tasks_;
  std::vector<float> padded_;  // x with its zero border, where there is padding
  std::vector<float> sums_;    // each task's register block between images
  std::vector<float> zeros_;   // a dy plane of zeros for outputs past the last
};

}  // namespace poseidon
