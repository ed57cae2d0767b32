// Accuracy: the fraction of samples whose label is among the top_k highest
// logits, a metric reported beside the loss. A label ranks within the top k
// when fewer than k classes score strictly higher, so ties count as hits.
// Declared here so that the GPU implementation (accuracy.cu) can reuse it.
#pragma once

#include "core/layer.h"

namespace poseidon {

class AccuracyLayer : public Layer {
 public:
  explicit AccuracyLayer(const ConfigNode& config);

  std::pair<int, int> input_count() const override { return {2, 2}; }
  bool differentiable() const override { return false; }

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  int64_t forward_flops(const std::vector<Shape>& in) const override { return shape_numel(in[0]); }

 protected:
  int64_t top_k() const { return top_k_; }
  // Raises an Error unless `label` is a class index.
  void check_label(float label, int64_t sample, int64_t classes) const;

 private:
  int64_t top_k_;
};

}  // namespace poseidon
