// Wire formats: how a gradient travels between ranks. fp32 sends the
// gradient as it is; bf16 sends its upper 16 bits, rounded to nearest even
// (bfloat16: fp32's exponent range with an 8-bit significand), which halves
// the bytes of the parameter server's pushes and of every all-reduce step.
// Receivers widen bf16 back to fp32 and sum in fp32; values (the parameter
// server's pulls) always travel as fp32, so every replica keeps full-precision
// parameters.
#pragma once

#include <cstdint>
#include <string>

#include "core/bf16.h"

namespace poseidon::dist {

enum class Wire { fp32, bf16 };
std::string wire_name(Wire w);
// Throws Error naming the choices for a name that is neither.
Wire parse_wire(const std::string& name);
// Bytes one number takes on the wire.
inline int64_t wire_bytes(Wire w) { return w == Wire::bf16 ? 2 : 4; }

// The conversions themselves are the engine's (core/bf16.h).
using poseidon::from_bf16;
using poseidon::to_bf16;

// x as the receiver of its bf16 sees it.
inline float bf16_rounded(float x) { return from_bf16(to_bf16(x)); }

void encode_bf16(const float* from, uint16_t* to, int64_t n);
void decode_bf16(const uint16_t* from, float* to, int64_t n);
// Rounds n floats in place to what bf16 keeps of them.
void round_to_bf16(float* x, int64_t n);

}  // namespace poseidon::dist
