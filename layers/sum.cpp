// Sum on the CPU (see sum.h).
#include "layers/sum.h"

#include "core/registry.h"

namespace poseidon {

SumLayer::SumLayer(const ConfigNode& config) : Layer(config) {
  if (auto node = config.find("coefficients")) {
    if (!node->is_sequence()) node->fail("expected a list of numbers, one per input");
    for (size_t i = 0; i < node->size(); ++i) coefficients_.push_back(static_cast<float>(node->at(i).as_double()));
  }
}

std::vector<Shape> SumLayer::reshape(const std::vector<Shape>& in) {
  for (size_t k = 1; k < in.size(); ++k)
    if (in[k] != in[0])
      fail("input " + std::to_string(k) + " has shape " + shape_str(in[k]) + " but input 0 has " + shape_str(in[0]) +
           "; all inputs must have the same shape");
  if (config().has("coefficients")) {
    if (coefficients_.size() != in.size())
      fail("has " + std::to_string(coefficients_.size()) + " coefficients for " + std::to_string(in.size()) +
               " inputs; give one per input",
           "coefficients");
  } else {
    coefficients_.assign(in.size(), 1.f);
  }
  return {in[0]};
}

void SumLayer::forward(LayerIO& io, RunContext&) {
  float* y = io.out[0]->data();
  const int64_t n = io.out[0]->numel();
  const float* x0 = io.in[0]->data();
  const float c0 = coefficients_[0];
  size_t k = 1;
  if (io.in.size() == 1) {
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] = c0 * x0[i];
  } else {
    // The first two inputs in one pass: a residual sum is all of the work,
    // and a pass of its own for the first input would add a third to it.
    const float* x1 = io.in[1]->data();
    const float c1 = coefficients_[1];
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] = c0 * x0[i] + c1 * x1[i];
    k = 2;
  }
  for (; k < io.in.size(); ++k) {
    const float* x = io.in[k]->data();
    const float c = coefficients_[k];
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] += c * x[i];
  }
}

void SumLayer::backward(LayerIO& io, RunContext&) {
  const float* dy = io.out_grad[0]->data();
  const int64_t n = io.out_grad[0]->numel();
  for (size_t k = 0; k < io.in.size(); ++k) {
    if (!io.in_grad[k]) continue;
    float* dx = io.in_grad[k]->data();
    const float c = coefficients_[k];
#pragma omp parallel for simd if (n > 32768)
    for (int64_t i = 0; i < n; ++i) dx[i] += c * dy[i];
  }
}

POSEIDON_REGISTER_LAYER(SumLayer, "sum", "element-wise weighted sum of inputs of equal shape",
                        {{"coefficients", "floats", "[1, 1, ...]", "one multiplier per input, in input order"}});

}  // namespace poseidon
