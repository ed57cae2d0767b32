// Fully connected on the GPU. cuBLAS is column-major: a row-major [r, c]
// matrix is, to cuBLAS, the column-major [c, r] matrix that is its
// transpose, so each row-major product C = A B is asked for as
// C^T = B^T A^T.
//
// The forward GEMM adds the bias and applies a fused ReLU
// (core/relu_fusion.h) in cuBLASLt's epilogue (core/cuda/lt_matmul.h); the
// weight gradient's GEMM writes the bias gradient in its BGRADB epilogue.
// Where cuBLASLt refuses a shape the GEMMs are cuBLAS's, the bias and ReLU
// one pass of the bias epilogue (core/cuda/bias_epilogue.h) and the bias
// gradient the engine's channel sums (core/cuda/channel_sums.h). A fused
// ReLU's backward masks dY in place first.
//
// In precision bf16 the products read X and dY as bfloat16: the blobs
// themselves where they are bfloat16 (core/blob_types.h), else copies
// rounded into the context's bf16 operand buffers, as W always is. They
// accumulate in float32 (CUBLAS_COMPUTE_32F) and write Y and dX in their
// blobs' types: a bfloat16 Y rounded once after the bias and ReLU (in
// cuBLASLt's epilogue, or from a float32 product in the bias epilogue's
// pass), a bfloat16 dX as (dX + dY W) rounded once (cuBLAS's beta in
// float32), as the CPU layer writes them; dW stays float32. The bias
// gradient is summed from the bfloat16 dY, as the CPU's bf16 layer sums it.
#include <climits>

#include "core/cuda/bf16.h"
#include "core/cuda/bias_epilogue.h"
#include "core/cuda/channel_sums.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/lt_matmul.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/fc.h"

namespace poseidon {

namespace {

int blas_int(int64_t v) {
  POSEIDON_CHECK(v >= 0 && v <= INT_MAX) << "matrix dimension " << v << " exceeds cuBLAS's int";
  return static_cast<int>(v);
}

// C (m x n, column-major) = op(A) op(B) + beta C in float32, from float32 A
// and B, or from bfloat16 ones (`bf16`) with float32 accumulation; a
// bfloat16 C (`c_bf16`) holds the float32 result rounded once.
void gemm(cublasHandle_t h, bool bf16, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
          const void* a, int lda, const void* b, int ldb, float beta, void* c, int ldc, bool c_bf16 = false) {
  const float one = 1.f;
  if (bf16)
    POSEIDON_CUBLAS_CHECK(cublasGemmEx(h, op_a, op_b, m, n, k, &one, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &beta, c,
                                       c_bf16 ? CUDA_R_16BF : CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
  else
    POSEIDON_CUBLAS_CHECK(cublasSgemm(h, op_a, op_b, m, n, k, &one, static_cast<const float*>(a), lda,
                                      static_cast<const float*>(b), ldb, &beta, static_cast<float*>(c), ldc));
}

// The first element of a device tensor of either type.
void* elements_of(const Tensor& t) {
  return t.dtype() == DType::bf16 ? static_cast<void*>(const_cast<uint16_t*>(t.bf16_data()))
                                  : static_cast<void*>(const_cast<float*>(t.data()));
}

class FcCudaLayer : public FcLayer {
 public:
  using FcLayer::FcLayer;
  // dX's product overwrites where the Net says so (beta 0), as the CPU's does.
  bool writes_input_grads() const override { return true; }
  // Every precision: bf16 was checked against the GPU's compute capability.
  bool supports_precision(Precision) const override { return true; }

  // The ReLU after the layer is applied in the forward GEMM's epilogue (or
  // the bias epilogue's pass) and, in backward, as a mask on dY.
  bool fuse_relu() override { return relu_fused_ = true; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {accept_input(in[0])}; }

  // Y [N, O] = X [N, F] W^T, asked for as Y^T (O x N) = W (O x F) X^T (F x N):
  // W's memory is, column-major, W^T (F x O), hence op T; X's is X^T, op N.
  // The bias (a vector over Y^T's rows) and a fused ReLU in cuBLASLt's
  // epilogue, else in one pass after the GEMM.
  void forward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->numel() == batch_ * features_) << name() << ": forward before reshape";
    if (batch_ == 0) return;
    auto& cuda_ctx = cuda::Context::get(ctx.device.index);
    cudaStream_t stream = cuda_ctx.compute();
    Tensor& out = *io.out[0];
    const bool y_bf16 = out.dtype() == DType::bf16;
    const float* bias = has_bias_ ? param(1).value.data() : nullptr;
    const bool epilogue = bias || relu_fused_;
    const int n = blas_int(batch_), o = blas_int(num_output_), f = blas_int(features_);
    if (f == 0) {
      POSEIDON_CUDA_CHECK(cudaMemsetAsync(elements_of(out), 0, out.bytes(), stream));  // +0 in either type
      if (epilogue && y_bf16)
        cuda::bias_epilogue(out.bf16_data(), out.bf16_data(), bias, n, o, 1, relu_fused_, stream);
      else if (epilogue)
        cuda::bias_epilogue(out.data(), out.data(), bias, n, o, 1, relu_fused_, stream);
      return;
    }
    Operands op(*this, cuda_ctx);
    POSEIDON_CHECK(op.bf16 || !y_bf16) << name() << ": a bfloat16 output outside precision bf16";
    const void* w = op.read(Slot::weight, param(0).value);
    const void* x = op.read(Slot::input, *io.in[0]);
    const cuda::LtShape fused{.op_a = CUBLAS_OP_T, .op_b = CUBLAS_OP_N, .m = o, .n = n, .k = f, .lda = f,
                              .ldb = f, .ldd = o, .bf16 = op.bf16, .d_bf16 = y_bf16, .tf32 = cuda_ctx.tf32(),
                              .epilogue = forward_epilogue()};
    if (epilogue && forward_lt_.run(cuda_ctx, fused, w, x, elements_of(out), const_cast<float*>(bias))) return;
    if (!y_bf16 || !epilogue) {
      gemm(cuda_ctx.cublas(), op.bf16, CUBLAS_OP_T, CUBLAS_OP_N, o, n, f, w, f, x, f, 0.f, elements_of(out), o, y_bf16);
      if (epilogue) cuda::bias_epilogue(out.data(), out.data(), bias, n, o, 1, relu_fused_, stream);
      return;
    }
    // A bfloat16 Y with an epilogue cuBLASLt refused: the float32 product,
    // then one rounding after the bias and ReLU, as the CPU layer rounds.
    if (product_.device() != ctx.device) product_ = Tensor::on(ctx.device);
    product_.resize({batch_, num_output_});
    gemm(cuda_ctx.cublas(), op.bf16, CUBLAS_OP_T, CUBLAS_OP_N, o, n, f, w, f, x, f, 0.f, product_.data(), o);
    cuda::bias_epilogue(out.bf16_data(), product_.data(), bias, n, o, 1, relu_fused_, stream);
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    auto& cuda_ctx = cuda::Context::get(ctx.device.index);
    cudaStream_t stream = cuda_ctx.compute();
    const int n = blas_int(batch_), o = blas_int(num_output_), f = blas_int(features_);
    // A fused ReLU's backward turns dY into the gradient at the ReLU's input,
    // in place, as the CPU layer does: no layer reads it after this one.
    const Tensor& out_grad = *io.out_grad[0];
    if (relu_fused_ && out_grad.dtype() == DType::bf16)
      cuda::relu_mask(io.out[0]->bf16_data(), const_cast<uint16_t*>(out_grad.bf16_data()), out_grad.numel(), stream);
    else if (relu_fused_)
      cuda::relu_mask(io.out[0]->data(), const_cast<float*>(out_grad.data()), out_grad.numel(), stream);
    Operands op(*this, cuda_ctx);
    const void* dy = op.read(Slot::output, *io.out_grad[0]);
    // dW [O, F] = dY^T X, overwritten like the CPU's, asked for as
    // dW^T (F x O) = X^T (F x N) dY (N x O): X's memory is X^T (op N), dY's
    // is dY^T (O x N), hence op T. db [O] is the sum of that B = dY over
    // the GEMM's k (N): cuBLASLt's BGRADB epilogue writes it where it can.
    bool bias_summed = false;
    if (io.writes_param_grad(0) && f > 0) {
      float* dw = param(0).grad.data();
      const void* x = n > 0 ? op.read(Slot::input, *io.in[0]) : nullptr;
      const cuda::LtShape with_bias_grad{.op_a = CUBLAS_OP_N, .op_b = CUBLAS_OP_T, .m = f, .n = o, .k = n, .lda = f,
                                         .ldb = o, .ldd = f, .bf16 = op.bf16, .tf32 = cuda_ctx.tf32(),
                                         .epilogue = CUBLASLT_EPILOGUE_BGRADB};
      if (n == 0)
        POSEIDON_CUDA_CHECK(cudaMemsetAsync(dw, 0, size_t(o) * f * sizeof(float), stream));
      else if (has_bias_ && weight_grad_lt_.run(cuda_ctx, with_bias_grad, x, dy, dw, param(1).grad.data()))
        bias_summed = true;
      else
        gemm(cuda_ctx.cublas(), op.bf16, CUBLAS_OP_N, CUBLAS_OP_T, f, o, n, x, f, dy, o, 0.f, dw, f);
    }
    // Else db [O] = the sum over n of dY [n, O] (core/cuda/channel_sums.h:
    // for a batch of up to 256 rows, n ascending as the CPU adds them).
    if (has_bias_ && !bias_summed) {
      float* db = param(1).grad.data();
      if (op.bf16)
        cuda::channel_sums(cuda_ctx, db, static_cast<const uint16_t*>(dy), n, o, 1);
      else
        cuda::channel_sums(cuda_ctx, db, static_cast<const float*>(dy), n, o, 1);
    }
    // dX [N, F] += dY W, asked for as dX^T (F x N) += W^T (F x O) dY^T (O x N):
    // both memories already are those column-major matrices (op N). Where
    // this layer is the first to write dX it overwrites it (beta 0; with no
    // output, a product of nothing: zero).
    const bool overwrite = io.overwrites_input_grad(0);
    if (io.in_grad[0] && n > 0 && f > 0 && o > 0)
      gemm(cuda_ctx.cublas(), op.bf16, CUBLAS_OP_N, CUBLAS_OP_N, f, n, o, op.read(Slot::weight, param(0).value), f, dy,
           o, overwrite ? 0.f : 1.f, elements_of(*io.in_grad[0]), f, io.in_grad[0]->dtype() == DType::bf16);
    else if (io.in_grad[0] && overwrite)
      io.in_grad[0]->zero();
  }

 private:
  using Slot = cuda::Context::Bf16Operand;

  // What cuBLASLt's forward epilogue applies: the bias, a fused ReLU, or both.
  cublasLtEpilogue_t forward_epilogue() const {
    if (!has_bias_) return CUBLASLT_EPILOGUE_RELU;
    return relu_fused_ ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  }

  // What the products read: the layer's float32 tensors, or in precision
  // bf16 its bfloat16 blobs as they are and bfloat16 copies of its float32
  // tensors, rounded into the context's bf16 operand buffers as they are read.
  struct Operands {
    Operands(const FcCudaLayer& layer, cuda::Context& gpu) : bf16(layer.precision() == Precision::bf16), gpu(gpu) {}
    const void* read(Slot slot, const Tensor& t) {
      if (!bf16) return t.data();
      if (t.dtype() == DType::bf16) return t.bf16_data();
      void* copy = gpu.bf16_operand(slot, size_t(t.numel()) * sizeof(uint16_t));
      cuda::round_to_bf16(static_cast<uint16_t*>(copy), t.data(), t.numel(), gpu.compute());
      return copy;
    }
    const bool bf16;
    cuda::Context& gpu;
  };

  // The forward GEMM with its epilogue, and dW's GEMM writing db.
  cuda::LtMatmul forward_lt_, weight_grad_lt_;
  // A bfloat16 output's float32 product where cuBLASLt refused the epilogue.
  Tensor product_;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(FcCudaLayer, "fc");

}  // namespace poseidon
