// Flatten on the CPU (see flatten.h).
#include "layers/flatten.h"

#include "core/registry.h"

namespace poseidon {

std::vector<Shape> FlattenLayer::reshape(const std::vector<Shape>& in) {
  const int64_t ndim = static_cast<int64_t>(in[0].size());
  if (axis_ < -ndim || axis_ >= ndim)
    fail("axis " + std::to_string(axis_) + " is out of range for input of shape " + shape_str(in[0]), "axis");
  const int64_t axis = axis_ < 0 ? axis_ + ndim : axis_;
  Shape out(in[0].begin(), in[0].begin() + axis);
  out.push_back(shape_numel(Shape(in[0].begin() + axis, in[0].end())));
  return {out};
}

void FlattenLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  if (io.in_grad[0]->dtype() == DType::bf16) {
    add_rounded_into_bf16(io.out_grad[0]->bf16_data(), io.in_grad[0]->bf16_data(), io.in_grad[0]->numel());
    return;
  }
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t n = io.out_grad[0]->numel();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i];
}

POSEIDON_REGISTER_LAYER(FlattenLayer, "flatten", "merges the dimensions from axis on into one",
                        {{"axis", "int", "1", "first dimension merged; negative counts from the end"}});

}  // namespace poseidon
