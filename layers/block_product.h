// Matrix products small enough to stay in cache, for kernels that cut their
// work into blocks (conv_winograd.cpp): there BLAS's packing and threading
// cost more than the product itself when the shared dimension is a few dozen
// channels. The product keeps a 4 x 24 block of the result in registers
// while it walks the shared dimension. Sequential: callers spread their
// blocks over threads.
#pragma once

#include <cstdint>

namespace poseidon {

// block_product's columns come in whole vectors of this many floats.
constexpr int64_t kBlockProductLanes = 8;
// It runs fastest on whole panels of this many columns (the width of the
// block of results it holds in registers).
constexpr int64_t kBlockProductPanel = 3 * kBlockProductLanes;

// n rounded up to whole vectors of block_product's columns.
constexpr int64_t whole_block_product_lanes(int64_t n) {
  return (n + kBlockProductLanes - 1) / kBlockProductLanes * kBlockProductLanes;
}

// c[rows x cols] = a[rows x depth] b[depth x cols] (c += that with
// accumulate), all row-major, rows lda, ldb and ldc floats apart. cols must
// be a multiple of kBlockProductLanes.
void block_product(const float* a, int64_t lda, int64_t rows, int64_t depth, const float* b, int64_t ldb, int64_t cols,
                   float* c, int64_t ldc, bool accumulate);

// out[j ld_out + i] = in[i ld_in + j] for i < rows, j < cols.
void transpose_block(const float* in, int64_t ld_in, int64_t rows, int64_t cols, float* out, int64_t ld_out);

}  // namespace poseidon
