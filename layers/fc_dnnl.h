// The fc layer's oneDNN path, compiled where oneDNN is installed
// (POSEIDON_HAVE_DNNL): the three products of a fully connected layer as
// oneDNN matmul primitives, in float32 or in bfloat16 (precision bf16).
//   forward          Y[N,O]  = X[N,F] W[O,F]^T + b
//   backward data    dX[N,F] += dY[N,O] W[O,F]
//   backward weights dW[O,F] = dY[N,O]^T X[N,F]
//   backward bias    db[1,O] = 1[1,N] dY[N,O]
// Every operand is a plain row-major matrix read in place (a transpose is a
// stride, not a copy), except dY in float32 with many outputs: both backward
// products then read a column-major copy of it (see dy_column_major in
// fc_dnnl.cpp for the measurements). In float32 on a CPU where oneDNN stops
// at AVX2, backward data of all but small layers runs through BLAS instead
// (blas_backward_data in fc_dnnl.cpp, with its measurements), and elsewhere
// the float32 backward products run oneDNN's JIT GEMM rather than its first
// choice (kDnnlFloat32BackwardKernels, measured in fc_dnnl.cpp). In bf16 the
// primitives read X, W and dY in bfloat16 and write float32 with float32
// accumulation: X and dY from their bfloat16 blobs in place, or from float32
// ones rounded into buffers of this object; W as the weight's rounded copy
// that the update writes (core/rounded_weight.h), in place, or where the two
// products that read it prefer the blocked layouts layers/bf16_pack.h writes
// (AMX) moved into those (bfloat16 as it is, no rounding). Backward weights
// reuses the X that forward read, since the Layer contract runs backward
// after a forward over the same input.
//
// Everything that depends on the shape (primitives, memory objects, buffers,
// scratchpad) is made once in create(); the calls point the memory objects at
// the caller's tensors and execute.
#pragma once

#include <cstdint>
#include <memory>

#ifdef POSEIDON_HAVE_DNNL
#include <dnnl.hpp>
#include <unordered_map>

#include "layers/small_batch_weight_grad.h"
#endif

namespace poseidon {

// An operand as the layer holds it: float32, or bfloat16 bits (a bf16 blob,
// a weight's rounded copy). In float32 the products take float32 only.
struct FcOperand {
  const void* data = nullptr;
  bool bf16 = false;
};

struct DnnlFcShape {
  int64_t batch = 1, features = 1, num_output = 1;
  bool bias = true;
  bool bf16 = false;
  bool relu = false;  // forward applies a fused ReLU to y (core/relu_fusion.h)
};

#ifdef POSEIDON_HAVE_DNNL

class DnnlFc {
 public:
  // Null where oneDNN offers only reference loops for this shape and type,
  // or none (bfloat16 before AVX-512).
  static std::unique_ptr<DnnlFc> create(const DnnlFcShape& shape);

  // y = x w^T + b (b ignored without bias), or max(that, 0) with relu. In
  // bf16, w is the weight's rounded copy (bfloat16).
  void forward(FcOperand x, FcOperand w, const float* b, float* y);
  // dx += dy w when dx is not null (dx = dy w with overwrite_dx); dw = dy^T x
  // when dw is not null; db = column sums of dy with bias. In bf16 all three
  // read dy rounded, as the layer's reader of dy in bf16 (PyTorch's
  // autocast) would, and w is the copy forward read.
  void backward(FcOperand x, FcOperand w, FcOperand dy, float* dx, float* dw, float* db, bool overwrite_dx);

 private:
  // One product: its primitive, the memory objects of its operands (pointed
  // at the data on each call) and its argument map.
  struct Product {
    dnnl::matmul prim;
    dnnl::memory src, weights, bias, dst;
    std::unordered_map<int, dnnl::memory> args;
  };
  // A float32 row-major matrix (pointed at the caller's on each call) and
  // its copy, owned here, with the reorder that makes one from the other: in
  // bf16 rounded to bfloat16 (for X and dY from float32 blobs), for dY in
  // float32 laid out column-major. Small matrices are rounded by a loop
  // instead, without the reorder.
  struct Copy {
    dnnl::memory from, to;
    dnnl::reorder make;
    std::unordered_map<int, dnnl::memory> args;
    int64_t serial_rounding = 0;  // > 0: the loop's count of floats
  };

  explicit DnnlFc(const DnnlFcShape& shape);
  // `preferred`: the implementation asked of oneDNN first (dnnl_matmul).
  Product product(const dnnl::memory::desc& src, const dnnl::memory::desc& weights, const dnnl::memory::desc& bias,
                  const dnnl::memory::desc& dst, bool accumulate, bool relu = false, const char* preferred = nullptr);
  Copy copy(int64_t rows, int64_t cols, dnnl::memory::data_type type, dnnl::memory::format_tag tag);
  // The copy `c` of the caller's matrix `data`, made now.
  void* make(const float* data, Copy& c);
  // What a product reads for the caller's matrix: the matrix itself in
  // float32 or where it is bfloat16; else its copy, rounded now.
  void* read(FcOperand data, Copy& c);

  DnnlFcShape shape_;
  dnnl::stream stream_;
  size_t scratchpad_bytes_ = 0;
  dnnl::memory scratchpad_;
  Copy x_, dy_;
  Copy dy_columns_;  // float32 with dy_column_major() only
  Product forward_, backward_data_, backward_weights_, backward_bias_;
  Product backward_data_write_;  // backward_data_ without its sum: dx overwritten
  bool blas_backward_data_ = false;  // dX by BLAS; backward_data_* left unmade
  dnnl::memory ones_;  // [1, N] of 1, backward bias's src
  // In bf16 where oneDNN's products take W blocked as bf16_pack.h lays it
  // out: W's rounded copy moved into forward's layout (of W^T) and backward
  // data's.
  bool packed_ = false;
  dnnl::memory w_t_packed_, w_packed_;
  // At batches up to kSmallBatchWeightGradMax (bf16) or
  // kSmallBatchF32WeightGradMax (float32) where the CPU has the kernels
  // (small_batch_weight_grad.h): the weight gradient, in place of
  // backward_weights_.
  std::unique_ptr<Bf16WeightGrad> small_batch_weight_grad_;
  bool small_batch_f32_weight_grad_ = false;
  bool reference_ = false;
};

#else

// Without oneDNN create() always declines, so the layer never calls the rest.
class DnnlFc {
 public:
  static std::unique_ptr<DnnlFc> create(const DnnlFcShape&) { return nullptr; }
  void forward(FcOperand, FcOperand, const float*, float*) {}
  void backward(FcOperand, FcOperand, FcOperand, float*, float*, float*, bool) {}
};

#endif  // POSEIDON_HAVE_DNNL

}  // namespace poseidon
