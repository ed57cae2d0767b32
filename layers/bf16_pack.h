// The fc layer's weights in bfloat16 (the rounded copy the update writes,
// core/rounded_weight.h), moved into the blocked layout in which oneDNN's
// AMX matrix products read their second operand.
// Given a row-major W it reads as is, such a product first copies W into
// that layout on every call: with W blocked, VGG19-22K's classifier.6
// (batch 32, `ONEDNN_VERBOSE=1 poseidon time`) took 10.6 instead of 16.9 ms
// in its forward product and 12.0 instead of 27.0 in backward data. One pass
// over the bfloat16 W here writes both products' copies:
//   forward        B = W^T: K = W's columns, N = W's rows
//   backward data  B = W:   K = W's rows,    N = W's columns
// The layout ("BA16a64b2a" in oneDNN's terms) tiles B[K, N] into blocks of
// 32 K by 64 N, K padded to 32 and N to 64 with zeros; a block holds, for
// each pair of K rows, 64 pairs (B[k][n], B[k + 1][n]); blocks run along K
// first. Element (k, n) lies at
//   ((n / 64) * Kp / 32 + k / 32) * 2048 + (k % 32 / 2) * 128 + (n % 64) * 2 + k % 2
// with Kp the padded K.
#pragma once

#include <cstdint>

namespace poseidon {

struct PackedB {
  int64_t k = 0, n = 0;  // B's unpadded extents
  int64_t padded_k() const { return (k + 31) / 32 * 32; }
  int64_t padded_n() const { return (n + 63) / 64 * 64; }
  int64_t elements() const { return padded_k() * padded_n(); }
  int64_t offset(int64_t row, int64_t col) const {
    return ((col / 64) * (padded_k() / 32) + row / 32) * 2048 + (row % 32 / 2) * 128 + (col % 64) * 2 + row % 2;
  }
};

// True where this CPU runs the kernel (AVX-512F).
bool bf16_pack_supported();

// W[rows, cols] (row-major bfloat16) into `w_t`, laid out as
// PackedB{cols, rows} (W^T), and into `w`, laid out as PackedB{rows, cols}
// (W); either may be null. Copies aligned to 64 bytes (as oneDNN allocates)
// are written faster.
void pack_bf16_weights(const uint16_t* weights, int64_t rows, int64_t cols, uint16_t* w_t, uint16_t* w);

}  // namespace poseidon
