// Softmax on the CPU (see softmax.h).
#include "layers/softmax.h"

#include <algorithm>
#include <cmath>

#include "core/registry.h"

namespace poseidon {

std::vector<Shape> SoftmaxLayer::reshape(const std::vector<Shape>& in) {
  const Shape& s = in[0];
  const int64_t ndim = static_cast<int64_t>(s.size());
  if (axis_ < -ndim || axis_ >= ndim)
    fail("axis " + std::to_string(axis_) + " is out of range for input of shape " + shape_str(s), "axis");
  const int64_t axis = axis_ < 0 ? axis_ + ndim : axis_;
  outer_ = shape_numel(Shape(s.begin(), s.begin() + axis));
  size_ = s[axis];
  inner_ = shape_numel(Shape(s.begin() + axis + 1, s.end()));
  max_.resize(outer_ * inner_);
  sum_.resize(outer_ * inner_);
  return {s};
}

// The axis is strided by `inner_`; every loop runs over a whole row of
// inner_ positions at once, so memory is read in order.
void SoftmaxLayer::forward(LayerIO& io, RunContext&) {
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const int64_t size = size_, inner = inner_;
#pragma omp parallel for if (io.in[0]->numel() > 32768)
  for (int64_t o = 0; o < outer_; ++o) {
    const float* xo = x + o * size * inner;
    float* yo = y + o * size * inner;
    float* max = max_.data() + o * inner;
    float* sum = sum_.data() + o * inner;
    std::copy(xo, xo + inner, max);
    for (int64_t a = 1; a < size; ++a)
      for (int64_t i = 0; i < inner; ++i) max[i] = std::max(max[i], xo[a * inner + i]);
    std::fill(sum, sum + inner, 0.f);
    for (int64_t a = 0; a < size; ++a)
      for (int64_t i = 0; i < inner; ++i) {
        yo[a * inner + i] = std::exp(xo[a * inner + i] - max[i]);
        sum[i] += yo[a * inner + i];
      }
    for (int64_t i = 0; i < inner; ++i) sum[i] = 1.f / sum[i];
    for (int64_t a = 0; a < size; ++a)
      for (int64_t i = 0; i < inner; ++i) yo[a * inner + i] *= sum[i];
  }
}

void SoftmaxLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const float* y = io.out[0]->data();
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t size = size_, inner = inner_;
#pragma omp parallel for if (io.out[0]->numel() > 32768)
  for (int64_t o = 0; o < outer_; ++o) {
    const int64_t base = o * size * inner;
    float* dot = sum_.data() + o * inner;
    std::fill(dot, dot + inner, 0.f);
    for (int64_t a = 0; a < size; ++a)
      for (int64_t i = 0; i < inner; ++i) dot[i] += dy[base + a * inner + i] * y[base + a * inner + i];
    for (int64_t a = 0; a < size; ++a)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t j = base + a * inner + i;
        dx[j] += y[j] * (dy[j] - dot[i]);
      }
  }
}

POSEIDON_REGISTER_LAYER(SoftmaxLayer, "softmax", "softmax along an axis",
                        {{"axis", "int", "1", "dimension normalised; negative counts from the end"}});

}  // namespace poseidon
