// Names of the run precisions (see precision.h).
#include "core/precision.h"

#include "core/bf16.h"
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
  POSEIDON_REQUIRE(p != Precision::tf32 || device.is_cuda())
      << "precision tf32 is TF32 tensor-core math on a GPU; on the CPU use fp32 or bf16";
  if (p != Precision::bf16 || !device.is_cuda()) return;
  for (const device_info::Gpu& gpu : device_info::visible_gpus())
    if (gpu.index == device.index) require_precision_on_gpu(p, gpu);
}

void require_precision_on_gpu(Precision p, const device_info::Gpu& gpu) {
  POSEIDON_REQUIRE(p != Precision::bf16 || gpu.compute_major >= 8)
      << "precision bf16 needs a GPU of compute capability 8.0 or later (Ampere, Hopper); cuda:" << gpu.index
      << " (" << gpu.name << ") has " << gpu.compute_major << "." << gpu.compute_minor << ": use fp32 there";
}

void round_to_bf16(float* values, int64_t n) { round_to_bf16(values, values, n); }

void round_to_bf16(const float* from, float* to, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) to[i] = from_bf16(to_bf16(from[i]));
}

}  // namespace poseidon
