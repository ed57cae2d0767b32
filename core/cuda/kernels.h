// Element-wise kernels the engine itself needs on the GPU (Tensor fill, the
// solver's update, the finite checks), launched on the given stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/gate_scan.h"
#include "core/update_groups.h"
#include "core/update_rules.h"

namespace poseidon::cuda {

void fill(float* ptr, size_t n, float value, cudaStream_t stream);
// y += alpha * x
void axpy(float* y, const float* x, size_t n, float alpha, cudaStream_t stream);
// The Solver's update (core/solver.h) of n elements; `state` holds their
// state slots, n floats each, and is null for SGD without momentum.
void solver_update(const UpdateStep& step, float* value, const float* grad, float* state, size_t n,
                   cudaStream_t stream);
// The update of every parameter of a table of `count` slices in GPU memory
// (core/update_groups.h) covering `total` elements, in one launch; none where
// `rejected` (device memory, may be null) holds a non-zero value when it runs.
void update_table(const UpdateSlice* table, int count, int64_t total, const float* rejected, cudaStream_t stream);
// The finite guard's pass (core/gate_scan.h) in one launch.
void gate_scan(const GateScan& scan, float* gate, cudaStream_t stream);
// Index of the first NaN or infinity in ptr[0..n), or -1; waits for the stream.
int64_t first_non_finite(const float* ptr, size_t n, cudaStream_t stream);

}  // namespace poseidon::cuda
