// Eltwise on the CPU (see eltwise.h).
#include "layers/eltwise.h"

#include <algorithm>

#include "core/registry.h"

namespace poseidon {

EltwiseLayer::EltwiseLayer(const ConfigNode& config)
    : Layer(config), max_(config.get_choice("operation", {"prod", "max"}, "prod") == "max") {}

std::vector<Shape> EltwiseLayer::reshape(const std::vector<Shape>& in) {
  for (size_t k = 1; k < in.size(); ++k)
    if (in[k] != in[0])
      fail("input " + std::to_string(k) + " has shape " + shape_str(in[k]) + " but input 0 has " + shape_str(in[0]) +
           "; all inputs must have the same shape");
  return {in[0]};
}

void EltwiseLayer::forward(LayerIO& io, RunContext&) {
  float* y = io.out[0]->data();
  const int64_t n = io.out[0]->numel();
  std::copy(io.in[0]->data(), io.in[0]->data() + n, y);
  for (size_t k = 1; k < io.in.size(); ++k) {
    const float* x = io.in[k]->data();
    if (max_) {
#pragma omp parallel for simd if (n > 32768)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > y[i] ? x[i] : y[i];
    } else {
#pragma omp parallel for simd if (n > 32768)
      for (int64_t i = 0; i < n; ++i) y[i] *= x[i];
    }
  }
}

void EltwiseLayer::backward(LayerIO& io, RunContext&) {
  const float* dy = io.out_grad[0]->data();
  const int64_t n = io.out_grad[0]->numel();
  const size_t inputs = io.in.size();
  std::vector<const float*> x(inputs);
  for (size_t k = 0; k < inputs; ++k) x[k] = io.in[k]->data();
  for (size_t k = 0; k < inputs; ++k) {
    if (!io.in_grad[k]) continue;
    float* dx = io.in_grad[k]->data();
    if (max_) {
      // Input k wins where no earlier input reaches its value and no later one exceeds it.
#pragma omp parallel for if (n > 32768)
      for (int64_t i = 0; i < n; ++i) {
        bool wins = true;
        for (size_t j = 0; j < inputs && wins; ++j) wins = j < k ? x[j][i] < x[k][i] : j == k || x[j][i] <= x[k][i];
        if (wins) dx[i] += dy[i];
      }
    } else {
#pragma omp parallel for if (n > 32768)
      for (int64_t i = 0; i < n; ++i) {
        float others = dy[i];
        for (size_t j = 0; j < inputs; ++j)
          if (j != k) others *= x[j][i];
        dx[i] += others;
      }
    }
  }
}

POSEIDON_REGISTER_LAYER(EltwiseLayer, "eltwise", "element-wise product or maximum of inputs of equal shape",
                        {{"operation", "string", "prod", "prod|max"}});

}  // namespace poseidon
