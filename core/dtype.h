// The element types a Tensor holds. Parameters, their gradients, solver
// state and the values the losses read are float32; under precision bf16
// the blobs that the bf16 layers write (and the gradients that flow back
// into them) may be bfloat16, stored as their 16 bits (core/bf16.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace poseidon {

enum class DType : uint8_t { f32, bf16 };

inline const char* dtype_name(DType t) { return t == DType::bf16 ? "bf16" : "f32"; }
inline size_t dtype_size(DType t) { return t == DType::bf16 ? sizeof(uint16_t) : sizeof(float); }

}  // namespace poseidon
