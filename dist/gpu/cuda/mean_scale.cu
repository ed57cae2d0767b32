// The sum's scaling into a mean (see mean_scale.h).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "dist/gpu/cuda/mean_scale.h"

namespace poseidon::dist {

namespace {
__global__ void scale_kernel(float* x, size_t n, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = __fmul_rn(x[i], scale);
}
}  // namespace

void scale_in_place(float* x, size_t n, float scale, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<cuda::blocks_for(n), 256, 0, stream>>>(x, n, scale);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace poseidon::dist
