// The finite guard's pass over one training step on a GPU (core/step_gate.h),
// shared by its kernel (core/cuda/kernels.cu) and the host reference the
// tests compare it with: every loss term is copied into gate[0, count) and
// gate[count] becomes 1 when a term or an element of the flat gradient
// buffer is NaN or infinite. Nothing sets it back to 0, so every update
// queued behind a non-finite step reads it and changes nothing, until the
// host reads the step and stops.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace poseidon {

struct GateScan {
  static constexpr int kMaxTerms = 8;
  const float* terms[kMaxTerms] = {};  // each loss output's first element
  int count = 0;
  const float* grads = nullptr;  // every learnable gradient, end to end
  int64_t n = 0;
  POSEIDON_HOST_DEVICE int64_t total() const { return count + n; }
};

// Element t (< s.total()) of the pass: a term, copied into the gate, or a
// gradient; the gate's flag is set when it is not finite.
POSEIDON_HOST_DEVICE inline void gate_scan_element(const GateScan& s, int64_t t, float* gate) {
  float v;
  if (t < s.count) {
    v = *s.terms[t];
    gate[t] = v;
  } else {
    v = s.grads[t - s.count];
  }
#ifdef __CUDA_ARCH__
  if (!isfinite(v)) gate[s.count] = 1.f;
#else
  if (!std::isfinite(v)) gate[s.count] = 1.f;
#endif
}

// The kernel's work on the host, element by element.
inline void gate_scan_on_host(const GateScan& s, float* gate) {
  for (int64_t t = 0; t < s.total(); ++t) gate_scan_element(s, t, gate);
}

}  // namespace poseidon
