// GpuGemm (dist/gpu/gpu_gemm.h) with cuBLAS: the row-major product is the
// column-major one of the transposes, c^T = op(b)^T op(a)^T, so cuBLAS gets b
// before a and no data is rearranged. Its device buffers are borrowed from
// the context's caching allocator for its own stream: growing them never
// calls cudaFree, which would wait for every stream of the device, NCCL's
// all-reduces included.
#include "dist/gpu/gpu_gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/device_memory.h"

namespace poseidon::dist {

struct GpuGemm::State {
  cuda::Context* ctx = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  std::array<float*, 3> buffer{};  // a, b, c on the GPU
  std::array<size_t, 3> capacity{};
};

GpuGemm::GpuGemm(const Device& gpu) : state_(std::make_unique<State>()) {
  device_memory::require(gpu);
  state_->ctx = &cuda::Context::get(gpu.index);  // also makes it this thread's device
  state_->device = gpu.index;
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  POSEIDON_CUBLAS_CHECK(cublasCreate(&state_->handle));
  POSEIDON_CUBLAS_CHECK(cublasSetStream(state_->handle, state_->stream));
  POSEIDON_CUBLAS_CHECK(cublasSetMathMode(state_->handle, state_->ctx->cublas_math()));
}

GpuGemm::~GpuGemm() {
  // Destructors do not throw: failures here were reported by earlier calls.
  cudaSetDevice(state_->device);
  cudaStreamSynchronize(state_->stream);
  try {
    for (float* p : state_->buffer) state_->ctx->release_from(p, state_->stream);
  } catch (const std::exception&) {
  }
  cublasDestroy(state_->handle);
  cudaStreamDestroy(state_->stream);
}

void GpuGemm::operator()(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                         const float* b, float beta, float* c) {
  State& s = *state_;
  POSEIDON_CUDA_CHECK(cudaSetDevice(s.device));
  const std::array<size_t, 3> count{size_t(m * k), size_t(k * n), size_t(m * n)};
  for (size_t i = 0; i < 3; ++i)
    if (s.capacity[i] < count[i]) {
      s.ctx->release_from(s.buffer[i], s.stream);
      s.buffer[i] = nullptr;
      s.capacity[i] = 0;
      s.buffer[i] = static_cast<float*>(s.ctx->allocate_for(count[i] * sizeof(float), s.stream));
      s.capacity[i] = count[i];
    }
  auto up = [&](int i, const float* host) {
    POSEIDON_CUDA_CHECK(
        cudaMemcpyAsync(s.buffer[i], host, count[i] * sizeof(float), cudaMemcpyHostToDevice, s.stream));
  };
  up(0, a);
  up(1, b);
  if (beta != 0.f) up(2, c);
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  POSEIDON_CUBLAS_CHECK(cublasSgemm(s.handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, s.buffer[1],
                                    ldb, s.buffer[0], lda, &beta, s.buffer[2], static_cast<int>(n)));
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(c, s.buffer[2], count[2] * sizeof(float), cudaMemcpyDeviceToHost, s.stream));
  POSEIDON_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

}  // namespace poseidon::dist
