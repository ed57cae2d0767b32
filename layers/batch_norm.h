// Batch normalisation over dimension 1 (channels) of [N, C] or [N, C, ...]
// inputs, as PyTorch's BatchNorm1d/2d/3d: training normalises with the biased
// batch variance and folds the unbiased one into the running variance; the
// test phase normalises with the running statistics.
//   y = (x - mean) / sqrt(var + eps) * weight + bias
// Declared here so that the GPU implementation (batch_norm.cu) shares the
// keys, parameters and phase rules while taking over the computation.
// With a ReLU fused (core/relu_fusion.h) the output is max(y, 0).
// Under bf16 it reads and writes bfloat16 blobs where its input is one
// (core/blob_types.h), as autocast's batch norm does, and computes in
// float32 inside: the statistics, the affine map and the gradients are the
// float32 layer's on the widened values, each output rounded once. Its own
// `precision: fp32` keeps it on float32 blobs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/blob_types.h"
#include "core/layer.h"
#include "core/relu_fusion.h"

namespace poseidon {

class BatchNormLayer : public Layer, public ReluFusable, public BlobTypes {
 public:
  explicit BatchNormLayer(const ConfigNode& config);

  // The CPU kernels apply a following ReLU (core/relu_fusion.h).
  bool fuse_relu() override { return relu_fused_ = true; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  // Backward writes an input gradient that holds nothing yet rather than
  // adding to it (LayerIO::in_grad_unset).
  bool writes_input_grads() const override { return true; }
  int64_t forward_flops(const std::vector<Shape>& in) const override { return 2 * shape_numel(in[0]); }
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }

 protected:
  struct Extent {
    int64_t batch, channels, spatial, count;  // count: values per channel
  };
  static Extent extent(const Tensor& x);
  Param& running_mean() { return param(affine_ ? 2 : 0); }
  Param& running_var() { return param(affine_ ? 3 : 1); }
  // Fails unless a training forward has more than one value per channel.
  void check_batch(const Tensor& x, const Extent& e) const;

  double eps_, momentum_;
  bool affine_;
  bool batch_stats_ = true;  // the last forward used batch statistics

 private:
  // The CPU passes over float32 (T = float) or bfloat16 (uint16_t) blobs.
  template <class T>
  void forward_blocks(const T* x, T* y, const Extent& e);
  template <class T>
  void backward_blocks(const T* x, const T* y, const T* dy, T* dx, bool overwrite, const Extent& e);
  template <bool kRelu, class T>
  void backward_blocks(const T* x, const T* y, const T* dy, T* dx, bool overwrite, const Extent& e);

  std::vector<float> mean_, inv_std_;  // per channel, as used by the last forward
  // Per channel, three sums and three coefficients of the CPU passes, sized
  // in reshape so that steps allocate nothing.
  std::vector<double> sums_;
  std::vector<float> coefficients_;
};

}  // namespace poseidon
