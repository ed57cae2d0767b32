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
// uses these up to kSmallBatchWeightGradMax.
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

constexpr int64_t kSmallBatchWeightGradMax = 32;

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
