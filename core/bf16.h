// bfloat16 conversions, one formula for the CPU and the GPU: the CPU's
// rounding of operands (round_to_bf16, the bf16 wire of dist/plan/wire.h) and the
// GPU's casts into the bfloat16 copies that cuDNN and cuBLAS multiply
// (core/cuda/bf16.h) round alike, bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace poseidon {

POSEIDON_HOST_DEVICE inline uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

POSEIDON_HOST_DEVICE inline float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// Round to nearest, ties to even; a NaN stays a (quiet) NaN.
POSEIDON_HOST_DEVICE inline uint16_t to_bf16(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

POSEIDON_HOST_DEVICE inline float from_bf16(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// An element of a float32 or bfloat16 (its bits) array as a float, and a
// float result stored in the element's type, rounded once: loops written
// once for both types.
POSEIDON_HOST_DEVICE inline float as_float(float x) { return x; }
POSEIDON_HOST_DEVICE inline float as_float(uint16_t h) { return from_bf16(h); }
POSEIDON_HOST_DEVICE inline void store_float(float& to, float x) { to = x; }
POSEIDON_HOST_DEVICE inline void store_float(uint16_t& to, float x) { to = to_bf16(x); }

}  // namespace poseidon
