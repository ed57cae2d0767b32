// One GPU's working set, created on first use and kept for the process: the
// compute stream every layer kernel runs on, two copy streams (device to
// host and host to device) for moving gradients and parameters while the
// compute stream goes on, the cuBLAS and cuDNN handles bound to the compute
// stream (cuBLAS with a fixed workspace of its own), a bounded cuDNN workspace, buffers for the bfloat16 copies
// of a layer's operands (precision bf16), and the caching allocator. The cuDNN
// handle is made at its first use, so that a machine whose cuDNN cannot
// start fails only the layers that need it, with a message saying why.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <memory>
#include <mutex>

#include "core/cuda/caching_allocator.h"

namespace poseidon::cuda {

class Context {
 public:
  // The context of GPU `device`; also makes it the calling thread's device.
  static Context& get(int device);

  int device() const { return device_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t to_host() const { return to_host_; }
  cudaStream_t to_device() const { return to_device_; }
  cublasHandle_t cublas() const { return cublas_; }
  // Throws an Error naming cuDNN's complaint and where its libraries are
  // looked for when cuDNN cannot start.
  cudnnHandle_t cudnn();
  CachingAllocator& allocator() { return allocator_; }
  // Throws Error while the compute stream is captured as a graph
  // (core/step_graph.h), which fails the capture: memory requested then
  // would be zeroed or released only in the graph, not when the step runs
  // plain again.
  void refuse_memory_while_captured();

  // Device memory for work queued on `stream`, which need not be the compute
  // stream: the allocator's blocks belong to the compute stream, so a block
  // lent to another stream is ordered after the compute stream's work so far,
  // and its return orders the compute stream after `stream`'s work so far.
  void* allocate_for(size_t bytes, cudaStream_t stream);
  void release_from(void* ptr, cudaStream_t stream);

  // The largest workspace a cuDNN algorithm may use; algorithms that need
  // more are not chosen.
  static constexpr size_t kWorkspaceLimit = size_t(512) << 20;
  // Scratch of at least `bytes` (<= kWorkspaceLimit) for work queued on the
  // compute stream; valid until the next call. It grows through the caching
  // allocator: no device-wide synchronisation (cudaFree) while other streams
  // (collectives', the copies') may be busy.
  void* workspace(size_t bytes);

  // The bfloat16 copies a conv or fc layer multiplies in precision bf16
  // (its input, weight, output or output gradient) and the bfloat16 result
  // on its way to a float32 tensor: one buffer per slot, shared by the
  // device's layers (they run one at a time on the compute stream), of at
  // least `bytes`, valid until the next call for the same slot. They grow
  // like the workspace, so training steps after the first allocate nothing.
  enum class Bf16Operand { input, weight, output, result };
  void* bf16_operand(Bf16Operand slot, size_t bytes);

  // Whether cuDNN's backward convolutions prefer deterministic algorithms
  // (the same gradients from the same inputs, run after run) over faster
  // ones that sum with atomics: yes, unless POSEIDON_CUDNN_FASTEST=1 or
  // set_deterministic(false). A change applies to the convolutions set up
  // from then on (each sets itself up again when it sees it).
  bool deterministic() const { return deterministic_; }
  void set_deterministic(bool on) { deterministic_ = on; }

  // TF32 tensor-core math for FP32 GEMMs and convolutions: off, so that GPU
  // results match the CPU's to 1e-4 (POSEIDON_TF32=1 turns it on).
  bool tf32() const { return tf32_; }
  // Turns TF32 on or off for the GEMMs from now on and the convolutions set
  // up from now on (precision tf32: core/precision.h).
  void set_tf32(bool on);
  // cuBLAS's math mode for that choice: TF32 tensor cores, or cuBLAS's
  // default FP32 math.
  cublasMath_t cublas_math() const { return tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH; }

  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  explicit Context(int device);
  // Makes `later` wait for the work queued on `earlier` so far.
  static void order(cudaStream_t later, cudaStream_t earlier);
  int device_;
  cudaStream_t compute_ = nullptr, to_host_ = nullptr, to_device_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  // cuBLAS's workspace (cublasSetWorkspace): 32 MiB, what cuBLAS asks for
  // on Hopper (4 MiB elsewhere), fixed for the process, so that a captured
  // step's GEMMs allocate nothing.
  static constexpr size_t kCublasWorkspace = size_t(32) << 20;
  void* cublas_workspace_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::mutex cudnn_mutex_;
  CachingAllocator allocator_;
  // A scratch buffer that only grows (workspace, bfloat16 copies).
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  void* grow(Scratch& scratch, size_t bytes);
  Scratch workspace_;
  std::array<Scratch, 4> bf16_operands_;
  bool tf32_ = false;
  bool deterministic_ = true;
};

// The most blocks an element-wise launch uses: a few waves of a large GPU
// (an H100 holds 132 x 8 blocks of 256 threads at once). Larger loops take
// several grid-stride passes.
constexpr size_t kMaxBlocks = 4096;

// Kernel launch shape for an element-wise loop over n items (grid-stride).
inline unsigned blocks_for(size_t n, unsigned threads = 256) {
  size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace poseidon::cuda
