// Softmax cross-entropy loss on the CPU (see softmax_loss.h).
#include "layers/softmax_loss.h"

#include <algorithm>
#include <cmath>

#include "core/registry.h"

namespace poseidon {

SoftmaxLossLayer::SoftmaxLossLayer(const ConfigNode& config)
    : Layer(config),
      loss_weight_(static_cast<float>(config.get_double("loss_weight", 1.0))),
      ignore_label_(config.get_int("ignore_label", -1)) {}

std::vector<Shape> SoftmaxLossLayer::reshape(const std::vector<Shape>& in) {
  const Shape& logits = in[0];
  bool ok = logits.size() >= 2;
  for (size_t d = 2; ok && d < logits.size(); ++d) ok = logits[d] == 1;
  if (!ok) fail("logits must be [N, C] or [N, C, 1, 1], got " + shape_str(logits));
  if (in[1].empty() || in[1][0] != logits[0] || shape_numel(in[1]) != logits[0])
    fail("labels must be [N] with N = " + std::to_string(logits[0]) + " (the logits' batch), got " + shape_str(in[1]));
  prob_.resize({logits[0], logits[1]});
  sample_loss_.resize(logits[0]);
  return {Shape{}};
}

void SoftmaxLossLayer::forward(LayerIO& io, RunContext&) {
  const int64_t batch = prob_.dim(0), classes = prob_.dim(1);
  const float* x = io.in[0]->data();
  const float* labels = io.in[1]->data();
  float* p = prob_.data();
  for (int64_t n = 0; n < batch; ++n) check_label(labels[n], n, classes);
#pragma omp parallel for if (batch * classes > 32768)
  for (int64_t n = 0; n < batch; ++n) {
    const float* xn = x + n * classes;
    float* pn = p + n * classes;
    float max = xn[0];
    for (int64_t c = 1; c < classes; ++c) max = std::max(max, xn[c]);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) {
      pn[c] = std::exp(xn[c] - max);
      sum += pn[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = 0; c < classes; ++c) pn[c] *= inv;
    sample_loss_[n] = counted(labels[n]) ? std::log(sum) + max - xn[static_cast<int64_t>(labels[n])] : 0.0;
  }
  // A serial sum keeps the loss independent of the thread count.
  double total = 0;
  count_ = 0;
  for (int64_t n = 0; n < batch; ++n) {
    total += sample_loss_[n];
    count_ += counted(labels[n]);
  }
  // No counted sample gives 0 / 0 = NaN, as PyTorch.
  (*io.out[0])[0] = static_cast<float>(total / count_);
}

void SoftmaxLossLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0] || count_ == 0) return;
  const int64_t batch = prob_.dim(0), classes = prob_.dim(1);
  const float scale = (*io.out_grad[0])[0] / static_cast<float>(count_);
  const float* labels = io.in[1]->data();
  const float* p = prob_.data();
  float* dx = io.in_grad[0]->data();
#pragma omp parallel for if (batch * classes > 32768)
  for (int64_t n = 0; n < batch; ++n) {
    if (!counted(labels[n])) continue;
    const int64_t label = static_cast<int64_t>(labels[n]);
    for (int64_t c = 0; c < classes; ++c)
      dx[n * classes + c] += scale * (p[n * classes + c] - (c == label ? 1.f : 0.f));
  }
}

void SoftmaxLossLayer::check_label(float label, int64_t sample, int64_t classes) const {
  if (!counted(label)) return;
  POSEIDON_REQUIRE(label >= 0.f && label < static_cast<float>(classes) && label == std::floor(label))
      << "layer '" << name() << "' (softmax_loss): label " << label << " of sample " << sample
      << " is not a class index in [0, " << classes << ")";
}

POSEIDON_REGISTER_LAYER(SoftmaxLossLayer, "softmax_loss",
                        "mean softmax cross-entropy of logits [N, C] against class labels [N]",
                        {{"loss_weight", "float", "1", "weight of this loss in the objective"},
                         {"ignore_label", "int", "-1", "samples with this label are left out of the loss (-1: none)"}});

}  // namespace poseidon
