// The arithmetic precision a run computes in (the training config's
// `precision`, `poseidon time --precision`). Blobs, parameters, gradients and
// solver state stay float32 in every mode; a precision only changes what the
// layers that have a path for it compute in:
//   fp32  float32 throughout (the default).
//   bf16  mixed precision with PyTorch autocast's rules: convolutions and
//         fully connected layers multiply in bfloat16 with float32
//         accumulation and float32 results; everything else (losses,
//         softmax, normalisation statistics, the solver) stays float32.
//   tf32  float32 storage with TF32 tensor-core math on a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"

namespace poseidon {

enum class Precision { fp32, bf16, tf32 };

const char* precision_name(Precision p);
// Throws Error naming the accepted values for anything else.
Precision parse_precision(const std::string& name);
// Throws Error where `device` has no such mode: bf16 runs on the CPU, tf32
// on a GPU.
void require_precision_on(Precision p, const Device& device);

// Rounds each float to the nearest bfloat16 (ties to even), as oneDNN's
// conversions do, keeping it a float: what a bf16 kernel reads.
void round_to_bf16(float* values, int64_t n);

}  // namespace poseidon
