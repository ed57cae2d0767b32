// The CPU loops of ActivationLayer (activation.h). Only the layers' .cpp
// files include this and instantiate it explicitly
// (template class ActivationLayer<Math>;): nvcc compiles the .cu files
// without OpenMP, and a copy of these loops instantiated there could be the
// one the linker keeps.
#pragma once

#include "layers/activation.h"

namespace poseidon {

template <class Math>
void ActivationLayer<Math>::forward(LayerIO& io, RunContext&) {
  const Math math = math_;
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const int64_t n = io.in[0]->numel();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = math.forward(x[i]);
}

template <class Math>
void ActivationLayer<Math>::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const Math math = math_;
  const float* x = io.in[0]->data();
  const float* y = io.out[0]->data();
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t n = io.in[0]->numel();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) dx[i] += math.slope(x[i], y[i]) * dy[i];
}

}  // namespace poseidon
