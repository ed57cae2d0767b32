// The element types of the Net's blobs (ARCHITECTURE.md, "Element types").
// Under precision bf16 a layer that multiplies in bfloat16 (conv, fc) writes
// its outputs, and in backward its input gradients, as bfloat16, and layers
// that only move or select values write the type they read. Such a layer
// says so by deriving from BlobTypes as well as from Layer (as ReluFusable
// does for fusion); every other layer reads and writes float32, and the Net
// hands it a float32 copy of any bfloat16 blob it reads (casts only at the
// edges of float32 layers). The loops below are those casts on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace poseidon {

class BlobTypes {
 public:
  virtual ~BlobTypes() = default;
  // The one type in which the layer reads all its inputs, given its input
  // blobs' types: bf16 only where every input blob is bf16 (the Net widens
  // bfloat16 blobs for a layer that reads f32, and never rounds a float32
  // one). Its input gradients are of the type it reads.
  virtual DType reads(const std::vector<DType>& inputs) const = 0;
  // The type of its outputs, and of their gradients, when it reads `read`.
  virtual DType writes(DType read) const = 0;
};

// What a layer that only moves or selects values reads (and writes):
// bf16 where every input is, unless its own `precision: fp32` keeps it in
// float32 (`keeps_fp32`).
DType moved_type(const std::vector<DType>& inputs, bool keeps_fp32);

// to[i] = from[i] widened (exact).
void widen_bf16(const uint16_t* from, float* to, int64_t n);
// to[i] = from[i] rounded to nearest even (core/bf16.h).
void round_into_bf16(const float* from, uint16_t* to, int64_t n);
// to[i] = (to[i] + from[i]) rounded, the sum taken in float32: how a
// float32 gradient joins a bfloat16 one that other readers add into.
void add_rounded_into_bf16(const float* from, uint16_t* to, int64_t n);
void add_rounded_into_bf16(const uint16_t* from, uint16_t* to, int64_t n);

// widen_bf16, round_into_bf16 and the bfloat16 add_rounded_into_bf16 on the
// calling thread alone, for a caller already inside a parallel loop: the
// forms above open a parallel region on every call, which costs more than a
// run of a few thousand values.
void widen_bf16_serially(const uint16_t* from, float* to, int64_t n);
void round_into_bf16_serially(const float* from, uint16_t* to, int64_t n);
void add_rounded_into_bf16_serially(const uint16_t* from, uint16_t* to, int64_t n);

}  // namespace poseidon
