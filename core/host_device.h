// POSEIDON_HOST_DEVICE marks inline arithmetic that both the CPU code and the
// CUDA kernels call (nvcc compiles it for both; other compilers see plain
// inline functions), so that a CPU loop and its kernel share one formula.
#pragma once

#ifdef __CUDACC__
#define POSEIDON_HOST_DEVICE __host__ __device__
#else
#define POSEIDON_HOST_DEVICE
#endif
