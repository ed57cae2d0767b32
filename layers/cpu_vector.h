// Support for the CPU layers' own vector loops: those bound by memory
// bandwidth (batch norm, ReLU, sum, pooling) and a few bound by arithmetic
// (conv_few_channel_grad.cpp). The build targets baseline x86-64 (SSE2)
// unless POSEIDON_NATIVE is on, so their kernels are also compiled for AVX2
// (and AVX-512) and the dynamic loader picks the widest the CPU supports.
// OpenMP outlines a parallel region into a function of its own that would not
// be cloned, so kernels work sequentially on a range and the layers spread
// ranges over threads with parallel_chunks.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POSEIDON_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define POSEIDON_VECTOR_CLONES
#endif

// For kernels bound by arithmetic rather than memory, written on 8-float
// vectors: a clone for AVX2 with fused multiply-adds (x86-64-v3) beside the
// baseline.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define POSEIDON_FMA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define POSEIDON_FMA_CLONES
#endif

namespace poseidon {

// Calls kernel(begin, end) on consecutive ranges of [0, n) of at most chunk
// elements, in parallel when n is large enough to pay for waking threads.
// Each thread takes one run of whole chunks, so threads meet at most at the
// cache line where two runs join.
template <class Kernel>
void parallel_chunks(int64_t n, Kernel kernel, int64_t chunk = 16384) {
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < chunks; ++i) kernel(i * chunk, std::min(n, (i + 1) * chunk));
}

}  // namespace poseidon
