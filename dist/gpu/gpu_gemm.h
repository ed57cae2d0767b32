// A GEMM on a GPU between host buffers, for work beside the layers that the
// host would take long over: the rebuild of an FC weight's gradient from its
// sufficient factors (dist/schemes/sfb.h), 2 P K M N flops per iteration, run by the
// communication thread. It has its own stream and cuBLAS handle (the
// context's belong to the compute stream and the thread that runs the net)
// and device buffers that grow to the largest call; TF32 as the context
// says (off unless POSEIDON_TF32=1). In a build without the CUDA backend
// constructing one throws.
#pragma once

#include <cstdint>
#include <memory>

#include "core/device.h"

namespace poseidon::dist {

class GpuGemm {
 public:
  explicit GpuGemm(const Device& gpu);
  ~GpuGemm();
  GpuGemm(const GpuGemm&) = delete;
  GpuGemm& operator=(const GpuGemm&) = delete;

  // c = alpha * op(a) * op(b) + beta * c, row-major with op(a) [m, k] and
  // op(b) [k, n] as core/math.h's gemm; a, b and c in host memory. Returns
  // when c holds the result.
  void operator()(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  const float* b, float beta, float* c);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace poseidon::dist
