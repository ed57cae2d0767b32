// The bias epilogue's kernels (see bias_epilogue.h).
#include "core/bf16.h"
#include "core/bias_epilogue.h"
#include "core/cuda/bias_epilogue.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"

namespace poseidon::cuda {

namespace {

// A grid's y dimension is at most 65535 blocks; more planes loop.
constexpr size_t kMaxGridY = 65535;

// Block row y takes the planes (one image's channel: inner values) y,
// y + gridDim.y, ...; its blocks walk a plane's values. A plane's channel
// is one remainder per plane, not per value.
template <class Out, class T>
__global__ void epilogue_kernel(Out* out, const T* y, const float* bias, size_t planes, size_t channels, size_t inner,
                                bool relu) {
  for (size_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const size_t c = plane % channels, first = plane * inner;
    for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < inner; j += size_t(gridDim.x) * blockDim.x)
      store(out, first + j, biased(load(y, first + j), bias, c, relu));
  }
}

// One value per plane (inner 1, an fc's [N, C] output): block row y takes
// the rows y, y + gridDim.y, ...; a row's threads are its channels.
template <class Out, class T>
__global__ void rows_kernel(Out* out, const T* y, const float* bias, size_t rows, size_t channels, bool relu) {
  for (size_t row = blockIdx.y; row < rows; row += gridDim.y) {
    const size_t first = row * channels;
    for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < channels; c += size_t(gridDim.x) * blockDim.x)
      store(out, first + c, biased(load(y, first + c), bias, c, relu));
  }
}

// A bfloat16 dy passes or becomes zero: stored back, it rounds to itself.
template <class T>
__global__ void relu_mask_kernel(const T* y, T* dy, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    store(dy, i, relu_masked(load(y, i), load(dy, i)));
}

template <class Out, class T>
void launch(Out* out, const T* y, const float* bias, size_t outer, size_t channels, size_t inner, bool relu,
            cudaStream_t stream) {
  const size_t planes = outer * channels;
  if (!planes || !inner) return;
  if (inner == 1) {
    const size_t rows = outer < kMaxGridY ? outer : kMaxGridY;
    const dim3 grid(static_cast<unsigned>((channels + 255) / 256), static_cast<unsigned>(rows));
    rows_kernel<<<grid, 256, 0, stream>>>(out, y, bias, outer, channels, relu);
    POSEIDON_CUDA_CHECK_LAUNCH();
    return;
  }
  // Threads in whole warps, no more than a plane needs (7 x 7 planes: 64).
  const size_t warps = (inner + 31) / 32;
  const unsigned threads = static_cast<unsigned>(warps >= 8 ? 256 : warps * 32);
  // Blocks across a plane so that the grid holds about kMaxBlocks of them.
  size_t across = (inner + threads - 1) / threads;
  const size_t rows = planes < kMaxGridY ? planes : kMaxGridY;
  const size_t most_across = kMaxBlocks / rows > 0 ? kMaxBlocks / rows : 1;
  if (across > most_across) across = most_across;
  const dim3 grid(static_cast<unsigned>(across), static_cast<unsigned>(rows));
  epilogue_kernel<<<grid, threads, 0, stream>>>(out, y, bias, planes, channels, inner, relu);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

}  // namespace

void bias_epilogue(float* out, const float* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream) {
  launch(out, y, bias, outer, channels, inner, relu, stream);
}

void bias_epilogue(float* out, const uint16_t* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream) {
  launch(out, y, bias, outer, channels, inner, relu, stream);
}

void bias_epilogue(uint16_t* out, const float* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream) {
  launch(out, y, bias, outer, channels, inner, relu, stream);
}

void bias_epilogue(uint16_t* out, const uint16_t* y, const float* bias, size_t outer, size_t channels, size_t inner,
                   bool relu, cudaStream_t stream) {
  launch(out, y, bias, outer, channels, inner, relu, stream);
}

template <class T>
void launch_relu_mask(const T* y, T* dy, size_t n, cudaStream_t stream) {
  if (!n) return;
  relu_mask_kernel<<<blocks_for(n), 256, 0, stream>>>(y, dy, n);
  POSEIDON_CUDA_CHECK_LAUNCH();
}

void relu_mask(const float* y, float* dy, size_t n, cudaStream_t stream) { launch_relu_mask(y, dy, n, stream); }

void relu_mask(const uint16_t* y, uint16_t* dy, size_t n, cudaStream_t stream) { launch_relu_mask(y, dy, n, stream); }

}  // namespace poseidon::cuda
