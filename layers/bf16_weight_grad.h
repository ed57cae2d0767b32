// The fc layer's weight gradient in bf16 at small batches,
//   dW[o][f] = sum over n of dy[n][o] * x[n][f]   (n < batch),
// on AMX tiles with float32 accumulation. With a batch of 32 each output sums
// 32 terms, one tile product, so the work is writing dW out: oneDNN's AMX
// matmul wrote VGG19-22K's classifier gradients (batch 32) at 10 to 12 GB/s,
// where this kernel streams them past the cache. At larger batches oneDNN's
// blocking over the batch pays: the fc layer uses this up to kMaxBatch.
#pragma once

#include <cstdint>
#include <vector>

namespace poseidon {

class Bf16WeightGrad {
 public:
  static constexpr int64_t kMaxBatch = 32;

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
