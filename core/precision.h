// The arithmetic precision a run computes in (the training config's
// `precision`, `poseidon time --precision`). Blobs, parameters, gradients and
// solver state stay float32 in every mode; a precision only changes what the
// layers that have a path for it compute in:
//   fp32  float32 throughout (the default).
//   bf16  mixed precision with PyTorch autocast's rules: convolutions and
//         fully connected layers multiply in bfloat16 with float32
//         accumulation and float32 results; everything else (losses,
//         softmax, normalisation statistics, the solver) stays float32. On
//         the CPU through oneDNN, on a GPU (compute capability 8.0 or later)
//         through cuDNN and cuBLAS.
//   tf32  float32 storage with TF32 tensor-core math on a GPU.
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/device_info.h"

namespace poseidon {

enum class Precision { fp32, bf16, tf32 };

const char* precision_name(Precision p);
// Throws Error naming the accepted values for anything else.
Precision parse_precision(const std::string& name);
// Throws Error where `device` has no such mode: tf32 is GPU math, and bf16
// on a GPU needs one of compute capability 8.0 or later (checked where that
// GPU is visible: require_precision_on_gpu).
void require_precision_on(Precision p, const Device& device);
// Throws Error where `gpu` lacks the hardware for `p`: bfloat16 tensor-core
// math came with compute capability 8.0 (Ampere).
void require_precision_on_gpu(Precision p, const device_info::Gpu& gpu);

// Rounds each float to the nearest bfloat16 (ties to even), as oneDNN's
// conversions do, keeping it a float: what a bf16 kernel reads. In place,
// or from one buffer into another.
void round_to_bf16(float* values, int64_t n);
void round_to_bf16(const float* from, float* to, int64_t n);

}  // namespace poseidon
