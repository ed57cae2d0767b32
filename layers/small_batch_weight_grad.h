// The fc layer's weight gradient at small batches,
//   dW[o][f] = sum over n of dy[n][o] * x[n][f]   (n < batch),
// in bf16 on AMX tiles with float32 accumulation, in float32 on AVX-512's
// fused multiply-adds. With a batch of 32 each output sums 32 terms, so the
// work is writing dW out: oneDNN's matmul wrote VGG19-22K's classifier
// gradients (batch 32) at 10 to 12 GB/s in bf16 and at 6 to 8 in float32,
// where these kernels stream them past the cache. `poseidon time` on
// models/vgg19_22k.yaml at 32x32, batch 32, 2 threads, two rounds against
// the engine before: fc backward (weight gradient and input gradient) of
// classifier.0, .3 and .6 in float32 126, 20 and 104-106 ms -> 91, 15 and
// 72-75 ms; in bf16 45-46 and 49-52 -> 33-34 and 29 ms (classifier.0, .6).
// At larger batches oneDNN's blocking over the batch pays: the fc layer
// uses the bf16 kernel up to kSmallBatchWeightGradMax, the float32 one up to
// kSmallBatchF32WeightGradMax.
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

constexpr int64_t kSmallBatchWeightGradMax = 32;
// oneDNN's JIT GEMM (kDnnlFloat32BackwardKernels, dnnl_support.h) writes dW
// faster than the float32 kernel from batch 16 on. Measured on an AVX-512
// CPU (Intel Xeon, 2 threads), `poseidon time bench/fc_wide.yaml` (fc layers
// 4096 -> 4096 and 4096 -> 1024) with either limit, backward ms of the
// layers, kernel vs JIT GEMM:
//   batch 1   1.51 vs 2.89 and 0.77 vs 1.61
//   batch 4   1.59-1.62 vs 3.01-3.52 and 0.93-0.95 vs 1.53-1.76
//   batch 8   1.87 vs 2.95 and 1.12 vs 1.64
//   batch 12  2.35-2.39 vs 2.64-3.10 and 1.42-1.46 vs 1.73-1.90
//   batch 16  3.68 vs 3.21 and 2.06 vs 2.01
//   batch 24  4.73-5.23 vs 3.51-3.54 and 2.31-2.68 vs 2.34-2.36
//   batch 32  6.08 vs 4.17 and 3.06 vs 2.72
// (at batch 32 on VGG19-22K's classifier layers as well: see fc_dnnl.cpp).
// Alone, on a dW that stays in cache from one call to the next
// (bench/fc_kernels.sh), the GEMM is ahead from batch 8; in the layer the
// kernel, which streams dW past the cache, is, up to 12.
constexpr int64_t kSmallBatchF32WeightGradMax = 12;

// True where this CPU has AVX-512F.
bool f32_weight_grad_supported();
// dw[o][f] (row-major [outputs, features]) = the sum above, from dy [batch,
// outputs] and x [batch, features], all row-major float32; the terms are
// added in the batch's order.
void f32_weight_grad(const float* dy, const float* x, int64_t batch, int64_t features, int64_t outputs, float* dw);

class Bf16WeightGrad {
 public:
  // True where this CPU has AMX for bfloat16 and the OS grants its use.
  static bool supported();

  Bf16WeightGrad(int64_t batch, int64_t features, int64_t outputs);

  // dw[o][f] (row-major [outputs, features], float32) = the sum above, from
  // dy [batch, outputs] and x [batch, features], both row-major bfloat16.
  void run(const uint16_t* dy, const uint16_t* x, float* dw);

 private:
  int64_t batch_, features_, outputs_;
  int64_t pairs_;                             // (batch + 1) / 2: the batch in pairs, the last padded with 0
  int64_t padded_outputs_, padded_features_;  // rounded up to 32: two tiles
  // dy_pairs_[o][m] = (dy[2m][o], dy[2m + 1][o]), x_pairs_[m][f] = (x[2m][f],
  // x[2m + 1][f]): two bfloat16 in one 32-bit word, the first in the low
  // half; zero in the padding.
  std::vector<uint32_t> dy_pairs_, x_pairs_;
};

}  // namespace poseidon
