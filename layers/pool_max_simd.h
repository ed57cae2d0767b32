// Max pooling at stride 2 in vector intrinsics, beside the portable loops of
// pool_kernels.cpp: at stride 2 each output reads every other input column,
// loads that those loops vectorise poorly (a few outputs per row and kernel
// column, each load split by shuffles). These kernels take a block of
// outputs through every tap of its windows with the block's best values in
// registers.
#pragma once

#include <cstdint>

#include "layers/pool.h"

namespace poseidon {

// Runs max_planes (pool_kernels.h) on the planes and returns true where a
// kernel here covers the geometry and the CPU; returns false, having done
// nothing, otherwise. Results and argmax are those of the portable loops.
bool max_planes_simd(const PoolGeometry& g, const float* src, float* dst, int32_t* argmax, int64_t planes);

}  // namespace poseidon
