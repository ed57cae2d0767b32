// Names of the run precisions (see precision.h).
#include "core/precision.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace poseidon {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::bf16:
      return "bf16";
    case Precision::tf32:
      return "tf32";
  }
  return "fp32";
}

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::tf32})
    if (name == precision_name(p)) return p;
  throw Error("unknown precision '" + name + "' (expected fp32, bf16 or tf32)");
}

void require_precision_on(Precision p, const Device& device) {
  POSEIDON_REQUIRE(p != Precision::bf16 || !device.is_cuda())
      << "precision bf16 runs on the CPU; on a GPU use fp32 or tf32";
  POSEIDON_REQUIRE(p != Precision::tf32 || device.is_cuda())
      << "precision tf32 is TF32 tensor-core math on a GPU; on the CPU use fp32 or bf16";
}

void round_to_bf16(float* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(values[i])) continue;
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof bits);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    bits &= 0xffff0000u;
    std::memcpy(&values[i], &bits, sizeof bits);
  }
}

}  // namespace poseidon
