// cuBLASLt matmuls with fused epilogues (see lt_matmul.h).
#include "core/cuda/lt_matmul.h"

#include <cstdint>
#include <utility>

#include "core/cuda/check.h"

namespace poseidon::cuda {

namespace {

template <class T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  POSEIDON_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

// The largest power of two, up to 256, that divides the address: the
// alignment the heuristic may count on for that operand (it assumes 256
// unless told, and a parameter inside a net's flat buffer may have less).
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

LtMatmul::~LtMatmul() {
  release();
  if (handle_) cublasLtDestroy(handle_);
}

void LtMatmul::release() {
  // Destruction may run at exit: statuses are ignored.
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  for (cublasLtMatrixLayout_t layout : {a_, b_, d_})
    if (layout) cublasLtMatrixLayoutDestroy(layout);
  desc_ = nullptr;
  a_ = b_ = d_ = nullptr;
  usable_ = false;
}

void LtMatmul::plan(const LtShape& s, const Alignments& alignments, void* vector) {
  release();
  planned_ = s;
  planned_alignments_ = alignments;
  if (!handle_) POSEIDON_CUBLAS_CHECK(cublasLtCreate(&handle_));
  const cublasComputeType_t compute = s.tf32 && !s.bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  POSEIDON_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
  set(desc_, CUBLASLT_MATMUL_DESC_TRANSA, s.op_a);
  set(desc_, CUBLASLT_MATMUL_DESC_TRANSB, s.op_b);
  set(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, s.epilogue);
  // The heuristic reads the vector's alignment from its pointer.
  set(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector);
  // The bias's type is D's unless set: it stays float32 under a bfloat16 D.
  if (s.d_bf16) set(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
  const cudaDataType_t in = s.bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // A and B as stored: op(A) is m x k, op(B) k x n.
  const bool a_n = s.op_a == CUBLAS_OP_N, b_n = s.op_b == CUBLAS_OP_N;
  POSEIDON_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, in, a_n ? s.m : s.k, a_n ? s.k : s.m, s.lda));
  POSEIDON_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, in, b_n ? s.k : s.n, b_n ? s.n : s.k, s.ldb));
  POSEIDON_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_, s.d_bf16 ? CUDA_R_16BF : CUDA_R_32F, s.m, s.n, s.ldd));

  cublasLtMatmulPreference_t preference = nullptr;
  POSEIDON_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const size_t limit = kWorkspace;
  cublasStatus_t status =
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit);
  // C is D (beta 0).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> least_alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignments.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignments.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignments.d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignments.d}};
  for (const auto& [attribute, bytes] : least_alignments)
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof bytes);
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, d_, d_, preference, 1, &best, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  // No heuristic for this configuration (the epilogue with these types or
  // transposes), or no algorithm: refused.
  if (status != CUBLAS_STATUS_SUCCESS || found == 0 || best.state != CUBLAS_STATUS_SUCCESS) return;
  algo_ = best.algo;
  workspace_ = best.workspaceSize;
  usable_ = true;
}

bool LtMatmul::run(Context& gpu, const LtShape& s, const void* a, const void* b, void* d, void* vector) {
  const Alignments alignments{alignment_of(a), alignment_of(b), alignment_of(d)};
  if (!(s == planned_) || !(alignments == planned_alignments_) || !desc_) plan(s, alignments, vector);
  if (!usable_) return false;
  set(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vector);
  const float one = 1.f, zero = 0.f;
  const cublasStatus_t status = cublasLtMatmul(handle_, desc_, &one, a, a_, b, b_, &zero, d, d_, d, d_, &algo_,
                                               gpu.workspace(workspace_), workspace_, gpu.compute());
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    usable_ = false;  // cuBLASLt queued nothing; the caller's path from now on
    return false;
  }
  POSEIDON_CUBLAS_CHECK(status);
  return true;
}

}  // namespace poseidon::cuda
