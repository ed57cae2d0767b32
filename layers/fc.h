// Fully connected (PyTorch's Linear): Y = X W^T + b with weight [out, in] and
// bias [out]. An input [N, ...] is read as [N, prod(...)], so a conv or pool
// output feeds it without an explicit flatten.
//   dW = dY^T X,  db = column sums of dY,  dX += dY W.
// Declared here so that the GPU implementation (fc.cu) can take over forward
// and backward.
// On the CPU the products run through oneDNN matmul where it is built in
// (layers/fc_dnnl.h), in float32 or bfloat16, and through BLAS otherwise or
// on request (engine: blas; float32 products). With a ReLU fused
// (core/relu_fusion.h) the output is max(y, 0).
#pragma once

#include <map>
#include <memory>

#include "core/blob_types.h"
#include "core/layer.h"
#include "core/relu_fusion.h"
#include "layers/bf16_edges.h"
#include "layers/rounded_operands.h"

namespace poseidon {

class DnnlFc;

class FcLayer : public Layer, public ReluFusable, public BlobTypes {
 public:
  explicit FcLayer(const ConfigNode& c);
  ~FcLayer() override;

  // The CPU engines apply a following ReLU (core/relu_fusion.h): oneDNN's
  // as it writes the output (the engine is remade for it), the other in
  // place after; backward masks the output gradient in place first.
  bool fuse_relu() override;

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  // Backward writes an input gradient that holds nothing yet rather than
  // adding to it (LayerIO::in_grad_unset).
  bool writes_input_grads() const override { return true; }
  int64_t forward_flops(const std::vector<Shape>& in) const override { return 2 * shape_numel(in[0]) * num_output_; }
  // bf16 on the CPU through oneDNN's bfloat16 kernels where it has them,
  // else through the float32 products on operands rounded to bfloat16 (see
  // bf16_emulated_); on a GPU (fc.cu) through cuBLAS's bfloat16 GEMMs. tf32
  // on a GPU through cuBLAS's tensor-core math.
  bool supports_precision(Precision p) const override;
  // Under bf16 it reads its input as it comes and writes its output and
  // input gradient as bfloat16 (core/blob_types.h; on the CPU through
  // layers/bf16_edges.h).
  DType reads(const std::vector<DType>& in) const override {
    return precision() == Precision::bf16 ? in[0] : DType::f32;
  }
  DType writes(DType) const override { return precision() == Precision::bf16 ? DType::bf16 : DType::f32; }

 protected:
  // Checks the input shape, declares the parameters and records the
  // geometry; returns the output shape.
  Shape accept_input(const Shape& in);

  int64_t num_output_ = 0;
  bool has_bias_ = true;
  int64_t batch_ = 0, features_ = 0;  // the input read as [batch_, features_]

 private:
  void prepare_cpu_engine();
  void add_bias_on_host(float* y);
  void bias_grad_on_host(const float* dy, float* db);
  // Sets the parameters' grad_bounded for this backward (core/layer.h) from
  // the largest |x| and |dy|.
  void bound_param_grads(float largest_x, float largest_dy, bool writes_weight_grad);
  // Backward on oneDNN's bfloat16 kernels, which read bfloat16 blobs as
  // they are; dx as edges_ hands it out.
  void backward_native_bf16(LayerIO& io, float* dx, bool overwrite_dx);
  // Backward on float32 operands (the blobs', or their edges' copies); dy
  // may change in place, y is the output as forward wrote it.
  void backward_float32(const float* x, float* dy, const float* y, float* dx, bool overwrite_dx,
                        bool writes_weight_grad);

  bool blas_only_ = false;
  // oneDNN's primitives per batch size and precision, kept so that switching
  // between the training and the test batch rebuilds nothing; null where
  // oneDNN declines (BLAS runs).
  std::map<std::pair<int64_t, Precision>, std::unique_ptr<DnnlFc>> dnnl_cache_;
  DnnlFc* dnnl_ = nullptr;  // the current shape's
  bool native_bf16_ = false;  // it runs oneDNN's bfloat16 kernels

  // bf16 without oneDNN's bfloat16 kernels (before AVX-512, or engine:
  // blas): the float32 products' operands, rounded.
  RoundedOperands bf16_;
  Bf16Edges edges_;  // float32 buffers of bfloat16 blobs
};

}  // namespace poseidon
