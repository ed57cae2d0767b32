// One cuBLASLt matmul with a fused epilogue, D (m x n, column-major, float32,
// or bfloat16 rounded once after the epilogue) = op(A) op(B), from float32
// or bfloat16 A and B with float32 accumulation
// (TF32 tensor cores where asked), with the epilogue adding a bias per row
// of D (and a ReLU after it), or writing the bias gradient of B (its sums
// over k, one per column of D). It is planned once per shape: descriptors
// and the algorithm cuBLASLt's heuristic ranks first within a fixed
// workspace, kept while the shape stays, so that the same inputs give the
// same bits run after run (the split-K reductions cuBLASLt may pick add in a
// fixed sequence). A shape cuBLASLt offers no algorithm for is refused, and
// the caller takes its unfused path. Each matmul holds a cuBLASLt handle of
// its own (a light context; every call names the GPU context's compute
// stream). A plan is also tied to the alignments of the operands'
// addresses, which the heuristic is told: another alignment plans again.
#pragma once

#include <cublasLt.h>

#include <cstdint>

#include "core/cuda/context.h"

namespace poseidon::cuda {

struct LtShape {
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  bool bf16 = false;    // A and B are bfloat16
  bool d_bf16 = false;  // D is bfloat16 (the bias stays float32)
  bool tf32 = false;    // float32 A and B may multiply on TF32 tensor cores
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool operator==(const LtShape&) const = default;
};

class LtMatmul {
 public:
  // The workspace an algorithm may use: fixed, so the ranking does not move.
  static constexpr size_t kWorkspace = size_t(32) << 20;

  LtMatmul() = default;
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // D = op(A) op(B) (beta 0) with `shape`'s epilogue on `vector` (the bias
  // read, or the bias gradient written); false, having queued nothing, when
  // cuBLASLt refuses the shape.
  bool run(Context& gpu, const LtShape& shape, const void* a, const void* b, void* d, void* vector);

 private:
  // The alignments, in bytes, that the operands' addresses have.
  struct Alignments {
    uint32_t a = 0, b = 0, d = 0;
    bool operator==(const Alignments&) const = default;
  };

  // Describes `shape` and picks its algorithm for operands with these
  // alignments; usable_ says whether one was found.
  void plan(const LtShape& shape, const Alignments& alignments, void* vector);
  void release();

  cublasLtHandle_t handle_ = nullptr;
  LtShape planned_;
  Alignments planned_alignments_;
  bool usable_ = false;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
};

}  // namespace poseidon::cuda
