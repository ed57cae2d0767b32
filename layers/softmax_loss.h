// Softmax cross-entropy loss (PyTorch's cross_entropy with mean reduction):
// inputs are logits [N, C] (or [N, C, 1, 1]) and labels [N] holding class
// indices as floats; the output is the scalar mean over counted samples of
// -log softmax(logits)[label]. Samples labelled `ignore_label` are left out of
// the sum and of the count. Backward: dlogits += g / count * (softmax - onehot).
// Declared here so that the GPU implementation (softmax_loss.cu) can take
// over forward and backward.
#pragma once

#include "core/layer.h"

namespace poseidon {

class SoftmaxLossLayer : public Layer {
 public:
  explicit SoftmaxLossLayer(const ConfigNode& config);

  std::pair<int, int> input_count() const override { return {2, 2}; }
  float loss_weight() const override { return loss_weight_; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return 4 * shape_numel(in[0]); }

 protected:
  bool counted(float label) const { return ignore_label_ == -1 || label != static_cast<float>(ignore_label_); }
  // Raises an Error unless a counted label is a class index.
  void check_label(float label, int64_t sample, int64_t classes) const;

  float loss_weight_;
  int64_t ignore_label_;  // -1: none
  Tensor prob_;           // softmax of the last forward, [N, C]
  int64_t count_ = 0;     // samples counted by the last forward

 private:
  std::vector<double> sample_loss_;
};

}  // namespace poseidon
