// Pooling on the GPU with the CPU layer's exact semantics (see pool.h): a
// thread per output scans its window in the CPU's row-major order (so the
// same tap wins a max, NaN included, and sums add in the same order), and
// backward gathers, a thread per input adding the gradients of the windows
// that cover it in the order the CPU scatters them: no atomics, and the
// same sums. bfloat16 blobs (core/blob_types.h) are read as floats and
// each result rounded once, as the CPU rounds its float32 result.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/elements.cuh"
#include "core/error.h"
#include "core/registry.h"
#include "layers/pool.h"

namespace poseidon {

namespace {

struct PoolGeometry {
  int64_t planes, height, width, out_h, out_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  bool count_pad;
};

// The CPU's avg_divisors for output o of one dimension.
__device__ float avg_divisor(int64_t o, int64_t size, int64_t kernel, int64_t stride, int64_t pad, bool count_pad) {
  const int64_t start = o * stride - pad, end = min(start + kernel, size + pad);
  return static_cast<float>(count_pad ? end - start : min(end, size) - max(start, int64_t(0)));
}

// Outputs [first, last] of a dimension whose window covers input i.
__device__ void covering_outputs(int64_t i, int64_t kernel, int64_t stride, int64_t pad, int64_t outputs,
                                 int64_t& first, int64_t& last) {
  const int64_t lowest_start = i + pad - kernel + 1;  // window start of the first output reaching i
  first = lowest_start <= 0 ? 0 : (lowest_start + stride - 1) / stride;
  last = min((i + pad) / stride, outputs - 1);
}

template <class T>
__global__ void max_pool_forward(const T* x, T* y, int32_t* argmax, PoolGeometry g) {
  const int64_t total = g.planes * g.out_h * g.out_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / (g.out_h * g.out_w), oy = i / g.out_w % g.out_h, ox = i % g.out_w;
    const T* plane = x + p * g.height * g.width;
    const int64_t y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    const int64_t y1 = min(y0 + g.kernel_h, g.height), x1 = min(x0 + g.kernel_w, g.width);
    float best = -INFINITY;
    int32_t best_at = static_cast<int32_t>(max(y0, int64_t(0)) * g.width + max(x0, int64_t(0)));
    for (int64_t iy = max(y0, int64_t(0)); iy < y1; ++iy)
      for (int64_t ix = max(x0, int64_t(0)); ix < x1; ++ix) {
        const float v = cuda::load(plane, iy * g.width + ix);
        if (v > best || v != v) {
          best = v;
          best_at = static_cast<int32_t>(iy * g.width + ix);
        }
      }
    cuda::store(y, i, best);
    argmax[i] = best_at;
  }
}

template <class T>
__global__ void max_pool_backward(const T* dy, const int32_t* argmax, T* dx, PoolGeometry g) {
  const int64_t total = g.planes * g.height * g.width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / (g.height * g.width), at = i % (g.height * g.width);
    const int64_t iy = at / g.width, ix = at % g.width;
    int64_t oy0, oy1, ox0, ox1;
    covering_outputs(iy, g.kernel_h, g.stride_h, g.pad_h, g.out_h, oy0, oy1);
    covering_outputs(ix, g.kernel_w, g.stride_w, g.pad_w, g.out_w, ox0, ox1);
    const int64_t out_base = p * g.out_h * g.out_w;
    float sum = cuda::load(dx, i);
    // Output order, as the CPU's scatter adds them.
    for (int64_t oy = oy0; oy <= oy1; ++oy)
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t o = out_base + oy * g.out_w + ox;
        if (argmax[o] == at) sum += cuda::load(dy, o);
      }
    cuda::store(dx, i, sum);
  }
}

template <class T>
__global__ void avg_pool_forward(const T* x, T* y, PoolGeometry g) {
  const int64_t total = g.planes * g.out_h * g.out_w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / (g.out_h * g.out_w), oy = i / g.out_w % g.out_h, ox = i % g.out_w;
    const T* plane = x + p * g.height * g.width;
    const int64_t y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    const int64_t y1 = min(y0 + g.kernel_h, g.height), x1 = min(x0 + g.kernel_w, g.width);
    float sum = 0.f;
    for (int64_t iy = max(y0, int64_t(0)); iy < y1; ++iy)
      for (int64_t ix = max(x0, int64_t(0)); ix < x1; ++ix) sum += cuda::load(plane, iy * g.width + ix);
    cuda::store(y, i,
                sum / (avg_divisor(oy, g.height, g.kernel_h, g.stride_h, g.pad_h, g.count_pad) *
                       avg_divisor(ox, g.width, g.kernel_w, g.stride_w, g.pad_w, g.count_pad)));
  }
}

template <class T>
__global__ void avg_pool_backward(const T* dy, T* dx, PoolGeometry g) {
  const int64_t total = g.planes * g.height * g.width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / (g.height * g.width), iy = i / g.width % g.height, ix = i % g.width;
    int64_t oy0, oy1, ox0, ox1;
    covering_outputs(iy, g.kernel_h, g.stride_h, g.pad_h, g.out_h, oy0, oy1);
    covering_outputs(ix, g.kernel_w, g.stride_w, g.pad_w, g.out_w, ox0, ox1);
    const T* grad = dy + p * g.out_h * g.out_w;
    float sum = cuda::load(dx, i);
    // The CPU's scatter order: output rows ascending, and within a row kernel
    // columns ascending, which reach this input from the last output down.
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      const float row_scale = 1.f / avg_divisor(oy, g.height, g.kernel_h, g.stride_h, g.pad_h, g.count_pad);
      for (int64_t ox = ox1; ox >= ox0; --ox) {
        const float col_scale = 1.f / avg_divisor(ox, g.width, g.kernel_w, g.stride_w, g.pad_w, g.count_pad);
        // Unfused, as the CPU adds it: the same float32 sum.
        sum = __fadd_rn(sum, __fmul_rn(__fmul_rn(cuda::load(grad, oy * g.out_w + ox), row_scale), col_scale));
      }
    }
    cuda::store(dx, i, sum);
  }
}

class PoolCudaLayer : public PoolLayer {
 public:
  using PoolLayer::PoolLayer;
  bool writes_input_grads() const override { return false; }  // the CPU class's backward only

  void forward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
    const PoolGeometry g = geometry();
    const size_t outputs = g.planes * g.out_h * g.out_w;
    if (!outputs) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (max_) {
      // int32 indices in a float tensor's storage: same size, and the
      // tensor brings the caching allocator.
      if (device_argmax_.device() != ctx.device) device_argmax_ = Tensor::on(ctx.device);
      device_argmax_.resize({static_cast<int64_t>(outputs)});
    }
    cuda::with_element_type(io.in[0]->dtype(), [&](auto t) {
      using T = decltype(t);
      const T* x = cuda::elements<T>(*io.in[0]);
      T* y = cuda::elements<T>(*io.out[0]);
      if (max_)
        max_pool_forward<<<cuda::blocks_for(outputs), 256, 0, stream>>>(x, y, argmax_indices(), g);
      else
        avg_pool_forward<<<cuda::blocks_for(outputs), 256, 0, stream>>>(x, y, g);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    if (!io.in_grad[0]) return;
    const PoolGeometry g = geometry();
    const size_t inputs = g.planes * g.height * g.width;
    if (!inputs || !g.out_h || !g.out_w) return;
    cudaStream_t stream = cuda::Context::get(ctx.device.index).compute();
    if (max_)
      POSEIDON_CHECK(device_argmax_.numel() == g.planes * g.out_h * g.out_w) << name() << ": backward before forward";
    cuda::with_element_type(io.in_grad[0]->dtype(), [&](auto t) {
      using T = decltype(t);
      const T* dy = cuda::elements<T>(*io.out_grad[0]);
      T* dx = cuda::elements<T>(*io.in_grad[0]);
      if (max_)
        max_pool_backward<<<cuda::blocks_for(inputs), 256, 0, stream>>>(dy, argmax_indices(), dx, g);
      else
        avg_pool_backward<<<cuda::blocks_for(inputs), 256, 0, stream>>>(dy, dx, g);
    });
    POSEIDON_CUDA_CHECK_LAUNCH();
  }

 private:
  PoolGeometry geometry() const {
    return {in_shape_[0] * in_shape_[1],
            in_shape_[2],
            in_shape_[3],
            out_h_,
            out_w_,
            kernel_[0],
            kernel_[1],
            stride_[0],
            stride_[1],
            pad_[0],
            pad_[1],
            count_include_pad_};
  }
  int32_t* argmax_indices() { return reinterpret_cast<int32_t*>(device_argmax_.data()); }

  Tensor device_argmax_;  // max: per output, the index of the max within its input plane (as int32)
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(PoolCudaLayer, "pool");

}  // namespace poseidon
