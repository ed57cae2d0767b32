// 2-D convolution, NCHW, with PyTorch's parameter layout (weight [out,
// in/groups, kh, kw], bias [out]) so checkpoints move between the two.
// Declared here so that the GPU implementation (conv.cu, cuDNN) can share the
// keys, shape checks and parameters while taking over the computation; the
// CPU engines (oneDNN, Winograd, im2col + GEMM) are set up only by the CPU class's
// reshape. With a ReLU fused (core/relu_fusion.h) the output is max(y, 0).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/blob_types.h"
#include "core/im2col.h"
#include "core/layer.h"
#include "core/relu_fusion.h"
#include "layers/bf16_edges.h"
#include "layers/conv_subsample.h"
#include "layers/rounded_operands.h"

namespace poseidon {

class DnnlConv;
class WinogradConv;

class ConvLayer : public Layer, public ReluFusable, public BlobTypes {
 public:
  explicit ConvLayer(const ConfigNode& c);
  ~ConvLayer() override;

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
  int64_t forward_flops(const std::vector<Shape>& in) const override;
  // bf16 on the CPU through oneDNN's bfloat16 kernels where it has them
  // (conv_dnnl.h), else through the float32 engines on operands rounded to
  // bfloat16 (see bf16_); on a GPU (conv.cu) through cuDNN's
  // bfloat16 convolutions. tf32 on a GPU through cuDNN's tensor-core math.
  bool supports_precision(Precision p) const override;
  // Under bf16 it reads its input as it comes and writes its output and
  // input gradient as bfloat16 (core/blob_types.h). On the CPU oneDNN's
  // bfloat16 direct kernels read and write the blobs as they are; the other
  // engines go through float32 copies (layers/bf16_edges.h).
  DType reads(const std::vector<DType>& in) const override {
    return precision() == Precision::bf16 ? in[0] : DType::f32;
  }
  DType writes(DType) const override { return precision() == Precision::bf16 ? DType::bf16 : DType::f32; }
  // On the CPU: "onednn", "onednn matmul" (small images), "winograd",
  // "im2col" or "pointwise" (1x1 as per-image products).
  std::string engine() const override;
  // The bytes of the float32 copies of bfloat16 blobs that the layer holds
  // (layers/bf16_edges.h).
  int64_t widened_bytes() const { return edges_.bytes(); }

 protected:
  using Hw = std::array<int64_t, 2>;

  // Checks an NCHW input shape against the layer's keys, declares the
  // parameters and records the geometry; returns the output shape.
  Shape accept_input(const Shape& nchw);
  ConvGeometry geometry(const Shape& nchw) const;

  int64_t num_output_ = 0, groups_ = 1;
  Hw kernel_{}, stride_{}, pad_{}, dilation_{};
  bool has_bias_ = true;

  Shape in_shape_;  // as of the last reshape
  ConvGeometry geom_;
  int64_t batch_ = 0, out_hw_ = 0;

 private:
  // The CPU engine for the accepted shape: oneDNN, or the im2col buffers.
  void prepare_cpu_engine();
  SubsampleShape subsample() const;  // of the input, at the layer's stride
  void convolve(const float* x, const float* w, float* y);
  // Backward on float32 operands (the blobs', or their edges' copies).
  void backward_float32(const float* x, const float* dy, float* dx, bool overwrite_dx);
  template <class Fn>
  void for_each_group(const float* w, int64_t images, Fn fn);
  void scatter_to_nchw(int64_t images, float* y);
  void gather_from_nchw(int64_t images, const float* dy);
  void add_bias(float* y);
  void bias_grad(const float* dy, float* db);

  enum class Engine { automatic, onednn, winograd, im2col };  // the `engine` key
  Engine engine_ = Engine::automatic;
  bool uses_winograd() const;
  std::unique_ptr<DnnlConv> dnnl_;  // null: another engine runs
  bool native_bf16_ = false;        // oneDNN's bfloat16 kernels run the layer
  // Those kernels' direct path (no subsampling, no matrix products), which
  // reads and writes the blobs as they are, of the types it was made for:
  // x's (and dx's) and y's (and dy's) at the last forward, before one
  // bfloat16. A forward on blobs of other types makes the engine anew.
  bool direct_bf16_ = false;
  DType x_type_ = DType::bf16, y_type_ = DType::bf16;
  void follow_blob_types(const LayerIO& io);
  const void* dnnl_weight();
  const void* rounded_or(const float* w);
  std::unique_ptr<WinogradConv> winograd_;  // null: another engine runs
  bool pointwise_ = false;
  int64_t chunk_ = 0;            // images unrolled per GEMM
  std::vector<float> col_;       // [in*kh*kw, chunk*hw]: im2col output, then its gradient
  std::vector<float> gathered_;  // [out, chunk*hw]: GEMM output, or gathered dY

  // A strided 1x1 convolution without padding on oneDNN convolves the pixels
  // it reads at stride 1 (conv_subsample.h): their copy, and its gradient.
  bool subsampled_ = false;
  std::vector<float> x_sub_, dx_sub_;  // [batch, channels, out_h, out_w]

  // bf16 without oneDNN's bfloat16 kernels for the shape: backward rounds
  // dy in place, and the float32 engines other than Winograd (which rounds
  // x and w as it reads them) multiply these rounded copies.
  bool rounds_dy_ = false;
  RoundedOperands bf16_;
  Bf16Edges edges_;  // float32 buffers of bfloat16 blobs
};

}  // namespace poseidon
