// The engine's own element-wise kernels (see kernels.h).
#include "core/cuda/kernels.h"

#include <cmath>

#include "core/cuda/check.h"
#include "core/cuda/context.h"

namespace poseidon::cuda {

namespace {

__global__ void fill_kernel(float* p, size_t n, float v) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = v;
}

__global__ void axpy_kernel(float* y, const float* x, size_t n, float a) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] += a * x[i];
}

// The element functions of core/update_rules.h, as the CPU runs them.
__global__ void solver_kernel(UpdateStep s, float* w, const float* g, float* state, size_t n) {
  float *buf = nullptr, *avg = nullptr;
  if (s.rule == UpdateRule::rmsprop) rmsprop_slots(s, state, n, &buf, &avg);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    switch (s.rule) {
      case UpdateRule::sgd:
        sgd_element(s, w, g, state, i);
        break;
      case UpdateRule::adam:
        adam_element(s, w, g, state, state + n, i);
        break;
      case UpdateRule::rmsprop:
        rmsprop_element(s, w, g, state, buf, avg, i);
        break;
    }
  }
}

// The table's range in a grid-stride loop, the table read from GPU memory:
// the arguments stay the same from step to step.
__global__ void update_table_kernel(const UpdateSlice* table, int count, const float* rejected) {
  update_table_walk(table, count, rejected, blockIdx.x * int64_t(blockDim.x) + threadIdx.x,
                    int64_t(gridDim.x) * blockDim.x);
}

__global__ void gate_scan_kernel(const __grid_constant__ GateScan scan, float* gate) {
  const int64_t total = scan.total();
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x)
    gate_scan_element(scan, t, gate);
}

// Smallest index of a non-finite value, through atomicMin.
__global__ void non_finite_kernel(const float* p, size_t n, unsigned long long* first) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    if (!isfinite(p[i])) atomicMin(first, static_cast<unsigned long long>(i));
}

}  // namespace

void fill(float* ptr, size_t n, float value, cudaStream_t stream) {
  if (!n) return;
  if (value == 0.f) {
    POSEIDON_CUDA_CHECK(cudaMemsetAsync(ptr, 0, n * sizeof(float), stream));
    return;
  }
  fill_kernel<<<blocks_for(n), 256, 0, stream>>>(ptr, n, value);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void axpy(float* y, const float* x, size_t n, float alpha, cudaStream_t stream) {
  if (!n) return;
  axpy_kernel<<<blocks_for(n), 256, 0, stream>>>(y, x, n, alpha);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void solver_update(const UpdateStep& step, float* value, const float* grad, float* state, size_t n,
                   cudaStream_t stream) {
  if (!n) return;
  solver_kernel<<<blocks_for(n), 256, 0, stream>>>(step, value, grad, state, n);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void update_table(const UpdateSlice* table, int count, int64_t total, const float* rejected, cudaStream_t stream) {
  if (!total) return;
  update_table_kernel<<<blocks_for(size_t(total)), 256, 0, stream>>>(table, count, rejected);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void gate_scan(const GateScan& scan, float* gate, cudaStream_t stream) {
  const int64_t total = scan.total();
  if (!total) return;
  gate_scan_kernel<<<blocks_for(size_t(total)), 256, 0, stream>>>(scan, gate);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

int64_t first_non_finite(const float* ptr, size_t n, cudaStream_t stream) {
  if (!n) return -1;
  unsigned long long* first = nullptr;
  const unsigned long long none = ~0ull;
  POSEIDON_CUDA_CHECK(cudaMallocAsync(&first, sizeof(*first), stream));
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(first, &none, sizeof(none), cudaMemcpyHostToDevice, stream));
  non_finite_kernel<<<blocks_for(n), 256, 0, stream>>>(ptr, n, first);
  POSEIDON_CUDA_CHECK_LAUNCH();
  unsigned long long result = 0;
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(&result, first, sizeof(result), cudaMemcpyDeviceToHost, stream));
  POSEIDON_CUDA_CHECK(cudaFreeAsync(first, stream));
  POSEIDON_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result == none ? -1 : static_cast<int64_t>(result);
}

}  // namespace poseidon::cuda
