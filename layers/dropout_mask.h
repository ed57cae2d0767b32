// Dropout's mask as a function of the forward's seed and the element's
// index alone, one definition for the CPU loop (dropout.cpp) and the GPU
// kernel (dropout.cu): nvcc compiles it for both (core/host_device.h), so
// the two devices drop the same elements for a seed, bit for bit, and the
// GPU draws its mask where it applies it, with no copy from the host.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace poseidon::dropout_mask {

// SplitMix64's output function: a bijection of 64-bit words whose outputs,
// over consecutive multiples of its increment, pass BigCrush. Element i of
// a mask is this function of the forward's seed and i alone, so the draws
// run in parallel, in any order, with any thread count, to the same mask.
POSEIDON_HOST_DEVICE inline uint64_t splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The 53 random bits of element i for the forward drawing `seed`.
POSEIDON_HOST_DEVICE inline uint64_t element_bits(uint64_t seed, uint64_t i) {
  return splitmix64(seed + (i + 1) * 0x9e3779b97f4a7c15ULL) >> 11;
}

// An element is dropped where its 53-bit uniform u = bits * 2^-53 is below
// ratio, i.e. where bits < ceil(ratio * 2^53): integers only, exact.
inline uint64_t drop_threshold(double ratio) { return static_cast<uint64_t>(std::ceil(ratio * 0x1.0p53)); }

// Element i's mask value: 0 where dropped, `scale` (1 / (1 - ratio)) elsewhere.
POSEIDON_HOST_DEVICE inline float element(uint64_t seed, uint64_t i, uint64_t threshold, float scale) {
  return element_bits(seed, i) < threshold ? 0.f : scale;
}

}  // namespace poseidon::dropout_mask
