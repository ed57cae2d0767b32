// The loops of CPU pooling (pool.cpp), each over a run of consecutive planes,
// in a file of their own so that they can be compiled for several vector
// instruction sets (cpu_vector.h) while the layer stays plain.
#pragma once

#include <cstdint>

#include "layers/pool.h"

namespace poseidon {

// The max of each window and where in its plane it is: the first maximum in
// row-major scan order wins and so does a NaN, as in PyTorch.
void max_planes(const PoolGeometry& g, const float* src, float* dst, int32_t* argmax, int64_t planes);
void max_planes_grad(const int32_t* argmax, const float* dy, int64_t out_plane, int64_t in_plane, float* dx,
                     int64_t planes);

void avg_planes(const PoolGeometry& g, const float* src, float* dst, int64_t planes);
void avg_planes_grad(const PoolGeometry& g, const float* dy, float* dx, int64_t planes);

// Average pooling whose one window is the whole unpadded plane (global
// pooling): a sum per plane, in the order the general loop takes.
void avg_whole_planes(const float* src, int64_t plane, float divisor, float* dst, int64_t planes);
void avg_whole_planes_grad(const float* dy, int64_t plane, float row_scale, float col_scale, float* dx, int64_t planes);

}  // namespace poseidon
