// ReLU on the CPU (see relu.h).
#include "layers/relu.h"

#include "core/bf16.h"
#include "core/registry.h"
#include "layers/cpu_vector.h"
#include "layers/relu_kernels.h"

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

POSEIDON_VECTOR_CLONES void relu_range_bf16(const uint16_t* x, uint16_t* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_positive(x[i]) ? x[i] : uint16_t{0};
}

// The sum in float32, rounded once (core/bf16.h).
POSEIDON_VECTOR_CLONES void relu_grad_range_bf16(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float g = from_bf16(dy[i]);
    dx[i] = to_bf16(from_bf16(dx[i]) + (bf16_positive(x[i]) ? g : 0.f));
  }
}

void forward_bf16(const Tensor& in, Tensor& out) {
  const uint16_t* x = in.bf16_data();
  uint16_t* y = out.bf16_data();
  parallel_chunks(in.numel(), [&](int64_t begin, int64_t end) { relu_range_bf16(x + begin, y + begin, end - begin); });
}

void backward_bf16(const Tensor& in, const Tensor& out_grad, Tensor& in_grad) {
  const uint16_t* x = in.bf16_data();
  const uint16_t* dy = out_grad.bf16_data();
  uint16_t* dx = in_grad.bf16_data();
  parallel_chunks(in.numel(), [&](int64_t begin, int64_t end) {
    relu_grad_range_bf16(x + begin, dy + begin, dx + begin, end - begin);
  });
}

}  // namespace

void ReluLayer::forward(LayerIO& io, RunContext&) {
  if (io.in[0]->dtype() == DType::bf16) return forward_bf16(*io.in[0], *io.out[0]);
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  parallel_chunks(io.in[0]->numel(),
                  [&](int64_t begin, int64_t end) { relu_range(x + begin, y + begin, end - begin); });
}

void ReluLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  if (io.in[0]->dtype() == DType::bf16) return backward_bf16(*io.in[0], *io.out_grad[0], *io.in_grad[0]);
  const float* x = io.in[0]->data();
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  parallel_chunks(io.in[0]->numel(),
                  [&](int64_t begin, int64_t end) { relu_grad_range(x + begin, dy + begin, dx + begin, end - begin); });
}

POSEIDON_REGISTER_LAYER(ReluLayer, "relu", "rectified linear unit, max(x, 0)", {});

}  // namespace poseidon
