// ReLU on the CPU (see relu.h).
#include "layers/relu.h"

#include "core/registry.h"

namespace poseidon {

void ReluLayer::forward(LayerIO& io, RunContext&) {
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const int64_t n = io.in[0]->numel();
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void ReluLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const float* x = io.in[0]->data();
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t n = io.in[0]->numel();
  // dy is read whether or not it is used: a conditional load keeps GCC from
  // vectorising (SSE2 has no masked loads), and the branch it leaves costs
  // about 20 times the vector loop's time on real activations.
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] += x[i] > 0.f ? g : 0.f;
  }
}

POSEIDON_REGISTER_LAYER(ReluLayer, "relu", "rectified linear unit, max(x, 0)", {});

}  // namespace poseidon
