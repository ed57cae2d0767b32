// ReLU on the CPU (see relu.h).
#include "layers/relu.h"

#include "core/registry.h"
#include "layers/cpu_vector.h"

namespace poseidon {
namespace {

POSEIDON_VECTOR_CLONES void relu_range(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

// dy is read whether or not it is used: a conditional load keeps GCC from
// vectorising (SSE2 has no masked loads), and the branch it leaves costs
// about 20 times the vector loop's time on real activations.
POSEIDON_VECTOR_CLONES void relu_grad_range(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = dy[i];
    dx[i] += x[i] > 0.f ? g : 0.f;
  }
}

}  // namespace

void ReluLayer::forward(LayerIO& io, RunContext&) {
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  parallel_chunks(io.in[0]->numel(),
                  [&](int64_t begin, int64_t end) { relu_range(x + begin, y + begin, end - begin); });
}

void ReluLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const float* x = io.in[0]->data();
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  parallel_chunks(io.in[0]->numel(),
                  [&](int64_t begin, int64_t end) { relu_grad_range(x + begin, dy + begin, dx + begin, end - begin); });
}

POSEIDON_REGISTER_LAYER(ReluLayer, "relu", "rectified linear unit, max(x, 0)", {});

}  // namespace poseidon
