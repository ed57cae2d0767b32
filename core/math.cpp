// GEMM through CBLAS (OpenBLAS) and thread settings.
#include "core/math.h"

#include <cblas.h>
#include <omp.h>

extern "C" void openblas_set_num_threads(int num_threads);

namespace poseidon {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

void set_num_threads(int n) {
  if (n <= 0) return;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace poseidon
