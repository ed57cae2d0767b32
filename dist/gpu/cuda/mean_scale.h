// The one kernel the device all-reduce needs beyond NCCL and core's casts:
// a bucket's sum multiplied by 1 / ranks in place, on the communicator's
// stream, each element the same single multiply the host path applies to
// the sum it lands (dist/schemes/allreduce.cpp), so both give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace poseidon::dist {

// x[i] *= scale for n floats, queued on `stream`.
void scale_in_place(float* x, size_t n, float scale, cudaStream_t stream);

}  // namespace poseidon::dist
