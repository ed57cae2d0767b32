// Accuracy on the CPU (see accuracy.h).
#include "layers/accuracy.h"

#include <cmath>

#include "core/registry.h"

namespace poseidon {

AccuracyLayer::AccuracyLayer(const ConfigNode& config) : Layer(config), top_k_(config.get_int("top_k", 1)) {
  if (top_k_ < 1) fail("top_k must be at least 1, got " + std::to_string(top_k_), "top_k");
}

std::vector<Shape> AccuracyLayer::reshape(const std::vector<Shape>& in) {
  const Shape& logits = in[0];
  bool ok = logits.size() >= 2;
  for (size_t d = 2; ok && d < logits.size(); ++d) ok = logits[d] == 1;
  if (!ok) fail("logits must be [N, C] or [N, C, 1, 1], got " + shape_str(logits));
  if (top_k_ > logits[1])
    fail("top_k " + std::to_string(top_k_) + " exceeds the " + std::to_string(logits[1]) + " classes", "top_k");
  if (in[1].empty() || in[1][0] != logits[0] || shape_numel(in[1]) != logits[0])
    fail("labels must be [N] with N = " + std::to_string(logits[0]) + " (the logits' batch), got " + shape_str(in[1]));
  return {Shape{}};
}

void AccuracyLayer::forward(LayerIO& io, RunContext&) {
  const int64_t batch = io.in[0]->dim(0), classes = io.in[0]->dim(1);
  const float* x = io.in[0]->data();
  const float* labels = io.in[1]->data();
  int64_t hits = 0;
  for (int64_t n = 0; n < batch; ++n) {
    const float label = labels[n];
    check_label(label, n, classes);
    const float* xn = x + n * classes;
    const float target = xn[static_cast<int64_t>(label)];
    int64_t higher = 0;
    for (int64_t c = 0; c < classes; ++c) higher += xn[c] > target;
    hits += higher < top_k_;
  }
  (*io.out[0])[0] = static_cast<float>(static_cast<double>(hits) / batch);
}

void AccuracyLayer::check_label(float label, int64_t sample, int64_t classes) const {
  POSEIDON_REQUIRE(label >= 0.f && label < static_cast<float>(classes) && label == std::floor(label))
      << "layer '" << name() << "' (accuracy): label " << label << " of sample " << sample
      << " is not a class index in [0, " << classes << ")";
}

POSEIDON_REGISTER_LAYER(AccuracyLayer, "accuracy",
                        "fraction of samples whose label is among the top_k logits (a metric)",
                        {{"top_k", "int", "1", "a hit when the label ranks within the top k"}});

}  // namespace poseidon
