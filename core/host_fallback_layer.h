// A layer without a GPU implementation in a GPU net: the CPU layer runs on
// host copies of its inputs, output gradients and parameters, and its
// outputs, input gradients (added to, as every layer does), parameter
// gradients and updated buffers are copied back to the GPU. Slower than a
// GPU layer, but lets a CPU-only layer (a plug-in's, typically) take part.
// The CPU layer computes in the precision the Net gives this one (bf16
// where it has a path for it), on float32 blobs.
#pragma once

#include <memory>
#include <vector>

#include "core/layer.h"

namespace poseidon {

class HostFallbackLayer : public Layer {
 public:
  HostFallbackLayer(const ConfigNode& config, std::unique_ptr<Layer> cpu_layer);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return cpu_->forward_flops(in); }
  float loss_weight() const override { return cpu_->loss_weight(); }
  bool differentiable() const override { return cpu_->differentiable(); }
  bool supports_precision(Precision p) const override { return cpu_->supports_precision(p); }
  std::pair<int, int> input_count() const override { return cpu_->input_count(); }
  int output_count() const override { return cpu_->output_count(); }
  // It waits for host copies of its operands.
  bool capturable() const override { return false; }

 private:
  std::unique_ptr<Layer> cpu_;
  std::vector<Tensor> in_, out_, in_grad_, out_grad_;  // host copies
  LayerIO host_io_;
};

}  // namespace poseidon
