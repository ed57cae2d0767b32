// Wire format names and the bulk bf16 conversions.
#include "dist/plan/wire.h"

#include "core/error.h"

namespace poseidon::dist {

std::string wire_name(Wire w) { return w == Wire::bf16 ? "bf16" : "fp32"; }

Wire parse_wire(const std::string& name) {
  if (name == "fp32") return Wire::fp32;
  if (name == "bf16") return Wire::bf16;
  throw Error("unknown wire format '" + name + "' (expected fp32 or bf16)");
}

void encode_bf16(const float* from, uint16_t* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = to_bf16(from[i]);
}

void decode_bf16(const uint16_t* from, float* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = from_bf16(from[i]);
}

void round_to_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_rounded(x[i]);
}

}  // namespace poseidon::dist
