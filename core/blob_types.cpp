// The CPU casts between float32 and bfloat16 blobs (see blob_types.h).
#include "core/blob_types.h"

#include "core/bf16.h"

namespace poseidon {

DType moved_type(const std::vector<DType>& inputs, bool keeps_fp32) {
  if (keeps_fp32 || inputs.empty()) return DType::f32;
  for (DType t : inputs)
    if (t != DType::bf16) return DType::f32;
  return DType::bf16;
}

void widen_bf16(const uint16_t* from, float* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = from_bf16(from[i]);
}

void round_into_bf16(const float* from, uint16_t* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from[i]);
}

void add_rounded_into_bf16(const float* from, uint16_t* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from_bf16(to[i]) + from[i]);
}

void add_rounded_into_bf16(const uint16_t* from, uint16_t* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from_bf16(to[i]) + from_bf16(from[i]));
}

}  // namespace poseidon
