// Dense math shared by layers: row-major GEMM on OpenBLAS and thread control.
#pragma once

#include <cstdint>

namespace poseidon {

// C = alpha * op(A) * op(B) + beta * C, row-major; op(A) is M x K, op(B) K x N.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Sets the threads used by OpenMP loops and by BLAS.
void set_num_threads(int n);
int num_threads();

}  // namespace poseidon
