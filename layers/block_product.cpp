// Register-blocked matrix product (see block_product.h). The build targets
// baseline x86-64, so the loops are compiled twice, for AVX2 with FMA and
// for the baseline, and the first call picks the one the CPU runs.
#include "layers/block_product.h"

#include <algorithm>

#include "core/error.h"

namespace poseidon {
namespace {

// Eight floats, loaded and stored without an alignment requirement.
constexpr int kLanes = kBlockProductLanes, kRowBlock = 4, kColumnVectors = kBlockProductPanel / kLanes;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float)), aligned(4)));

// c[R x 8 kVectors] (+)= a[R x depth] b[depth x 8 kVectors], the result in
// registers throughout.
template <int R, int kVectors>
__attribute__((always_inline)) inline void register_block(const float* a, int64_t lda, int64_t depth, const float* b,
                                                          int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  Lanes sum[R][kVectors] = {};
  if (accumulate) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < kVectors; ++j) sum[r][j] = *reinterpret_cast<const Lanes*>(c + r * ldc + kLanes * j);
  }
  for (int64_t k = 0; k < depth; ++k) {
    Lanes x[kVectors];
#pragma GCC unroll 4
    for (int j = 0; j < kVectors; ++j) x[j] = *reinterpret_cast<const Lanes*>(b + k * ldb + kLanes * j);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float s = a[r * lda + k];
#pragma GCC unroll 4
      for (int j = 0; j < kVectors; ++j) sum[r][j] += s * x[j];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < kVectors; ++j) *reinterpret_cast<Lanes*>(c + r * ldc + kLanes * j) = sum[r][j];
}

// One panel of 8 kVectors columns, all rows.
template <int kVectors>
__attribute__((always_inline)) inline void column_panel(const float* a, int64_t lda, int64_t rows, int64_t depth,
                                                        const float* b, int64_t ldb, float* c, int64_t ldc,
                                                        bool accumulate) {
  int64_t r = 0;
  for (; r + kRowBlock <= rows; r += kRowBlock)
    register_block<kRowBlock, kVectors>(a + r * lda, lda, depth, b, ldb, c + r * ldc, ldc, accumulate);
  switch (rows - r) {
    case 3: register_block<3, kVectors>(a + r * lda, lda, depth, b, ldb, c + r * ldc, ldc, accumulate); break;
    case 2: register_block<2, kVectors>(a + r * lda, lda, depth, b, ldb, c + r * ldc, ldc, accumulate); break;
    case 1: register_block<1, kVectors>(a + r * lda, lda, depth, b, ldb, c + r * ldc, ldc, accumulate); break;
    default: break;
  }
}

__attribute__((always_inline)) inline void product(const float* a, int64_t lda, int64_t rows, int64_t depth,
                                                   const float* b, int64_t ldb, int64_t cols, float* c, int64_t ldc,
                                                   bool accumulate) {
  constexpr int64_t kPanel = kLanes * kColumnVectors;
  int64_t j = 0;
  for (; j + kPanel <= cols; j += kPanel)
    column_panel<kColumnVectors>(a, lda, rows, depth, b + j, ldb, c + j, ldc, accumulate);
  if (cols - j == 2 * kLanes) column_panel<2>(a, lda, rows, depth, b + j, ldb, c + j, ldc, accumulate);
  if (cols - j == kLanes) column_panel<1>(a, lda, rows, depth, b + j, ldb, c + j, ldc, accumulate);
}

// 8 x 8 squares through registers: pairs of rows interleaved, then pairs of
// pairs, then halves swapped.
__attribute__((always_inline)) inline void transpose_square(const float* in, int64_t ld_in, float* out,
                                                            int64_t ld_out) {
  Lanes r[kLanes], t[kLanes], s[kLanes];
#pragma GCC unroll 8
  for (int i = 0; i < kLanes; ++i) r[i] = *reinterpret_cast<const Lanes*>(in + i * ld_in);
#pragma GCC unroll 4
  for (int i = 0; i < kLanes; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
#pragma GCC unroll 2
  for (int i = 0; i < kLanes; i += 4)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      s[i + 2 * j] = __builtin_shufflevector(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      s[i + 2 * j + 1] = __builtin_shufflevector(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    *reinterpret_cast<Lanes*>(out + j * ld_out) = __builtin_shufflevector(s[j], s[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    *reinterpret_cast<Lanes*>(out + (j + 4) * ld_out) =
        __builtin_shufflevector(s[j], s[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

__attribute__((always_inline)) inline void transpose(const float* in, int64_t ld_in, int64_t rows, int64_t cols,
                                                     float* out, int64_t ld_out) {
  const int64_t whole_rows = rows / kLanes * kLanes, whole_cols = cols / kLanes * kLanes;
  for (int64_t i = 0; i < whole_rows; i += kLanes)
    for (int64_t j = 0; j < whole_cols; j += kLanes) transpose_square(in + i * ld_in + j, ld_in, out + j * ld_out + i, ld_out);
  for (int64_t i = 0; i < rows; ++i)  // the edges
    for (int64_t j = i < whole_rows ? whole_cols : 0; j < cols; ++j) out[j * ld_out + i] = in[i * ld_in + j];
}

void product_baseline(const float* a, int64_t lda, int64_t rows, int64_t depth, const float* b, int64_t ldb,
                      int64_t cols, float* c, int64_t ldc, bool accumulate) {
  product(a, lda, rows, depth, b, ldb, cols, c, ldc, accumulate);
}

void transpose_baseline(const float* in, int64_t ld_in, int64_t rows, int64_t cols, float* out, int64_t ld_out) {
  transpose(in, ld_in, rows, cols, out, ld_out);
}

#if defined(__x86_64__)
bool has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

__attribute__((target("avx2,fma"))) void product_avx2(const float* a, int64_t lda, int64_t rows, int64_t depth,
                                                      const float* b, int64_t ldb, int64_t cols, float* c, int64_t ldc,
                                                      bool accumulate) {
  product(a, lda, rows, depth, b, ldb, cols, c, ldc, accumulate);
}

__attribute__((target("avx2,fma"))) void transpose_avx2(const float* in, int64_t ld_in, int64_t rows, int64_t cols,
                                                        float* out, int64_t ld_out) {
  transpose(in, ld_in, rows, cols, out, ld_out);
}

using Product = void (*)(const float*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                         bool);
Product pick_product() { return has_avx2_fma() ? product_avx2 : product_baseline; }

using Transpose = void (*)(const float*, int64_t, int64_t, int64_t, float*, int64_t);
Transpose pick_transpose() { return has_avx2_fma() ? transpose_avx2 : transpose_baseline; }
#endif

}  // namespace

void block_product(const float* a, int64_t lda, int64_t rows, int64_t depth, const float* b, int64_t ldb, int64_t cols,
                   float* c, int64_t ldc, bool accumulate) {
  POSEIDON_CHECK(cols % kLanes == 0) << "block_product: " << cols << " columns, expected a multiple of " << kLanes;
#if defined(__x86_64__)
  static const Product chosen = pick_product();
  chosen(a, lda, rows, depth, b, ldb, cols, c, ldc, accumulate);
#else
  product_baseline(a, lda, rows, depth, b, ldb, cols, c, ldc, accumulate);
#endif
}

void transpose_block(const float* in, int64_t ld_in, int64_t rows, int64_t cols, float* out, int64_t ld_out) {
#if defined(__x86_64__)
  static const Transpose chosen = pick_transpose();
  chosen(in, ld_in, rows, cols, out, ld_out);
#else
  transpose_baseline(in, ld_in, rows, cols, out, ld_out);
#endif
}

}  // namespace poseidon
