// The per-element arithmetic of the Solver's update rules, shared by its CPU
// loops (core/solver.cpp) and its GPU kernel (core/cuda/kernels.cu) so that
// both compute the same thing. An UpdateStep holds the numbers of one update
// of one parameter (learning rate with its multiplier, bias corrections),
// worked out once on the host; the element functions then read and write the
// parameter, its gradient and the state slots of element i. Where a bf16
// layer reads the parameter rounded to bfloat16 (core/rounded_weight.h),
// write_rounded then writes element i of that copy from the new value.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/bf16.h"
#include "core/host_device.h"

namespace poseidon {

enum class UpdateRule { sgd, adam, rmsprop };

struct UpdateStep {
  UpdateRule rule = UpdateRule::sgd;
  float lr = 0.f;      // lr * lr_mult; adam: further divided by 1 - beta1^step
  float decay = 0.f;   // L2 weight decay * decay_mult, added to the gradient as decay * w
  float shrink = 1.f;  // decoupled weight decay (adamw): w *= 1 - lr * decay before the update
  float momentum = 0.f;
  bool nesterov = false;
  float beta1 = 0.f, one_minus_beta1 = 0.f;  // adam's first moment
  float beta2 = 0.f, one_minus_beta2 = 0.f;  // adam's second moment
  float bias_correction2_sqrt = 1.f;         // sqrt(1 - beta2^step)
  float alpha = 0.f, one_minus_alpha = 0.f;  // rmsprop's smoothing
  float eps = 0.f;
  bool centered = false;
};

// torch.optim.SGD with momentum: d = g + decay * w; buf = momentum * buf + d;
// w -= lr * (nesterov ? d + momentum * buf : buf). Apart from sgd_element,
// with s.nesterov as a template argument, so that a CPU loop over it has no
// branch and vectorises.
template <bool Nesterov>
POSEIDON_HOST_DEVICE inline void sgd_momentum_element(const UpdateStep& s, float* w, const float* g, float* buf,
                                                      int64_t i) {
  const float d = g[i] + s.decay * w[i];
  const float b = s.momentum * buf[i] + d;
  buf[i] = b;
  w[i] -= s.lr * (Nesterov ? d + s.momentum * b : b);
}

// torch.optim.SGD; `buf` is null without momentum: w -= lr * (g + decay * w).
POSEIDON_HOST_DEVICE inline void sgd_element(const UpdateStep& s, float* w, const float* g, float* buf, int64_t i) {
  if (buf)
    return s.nesterov ? sgd_momentum_element<true>(s, w, g, buf, i) : sgd_momentum_element<false>(s, w, g, buf, i);
  w[i] -= s.lr * (g[i] + s.decay * w[i]);
}

// torch.optim.Adam and AdamW: m and v are the first and second moments
// (exp_avg, exp_avg_sq); w -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
POSEIDON_HOST_DEVICE inline void adam_element(const UpdateStep& s, float* w, const float* g, float* m, float* v,
                                              int64_t i) {
  const float wi = w[i] * s.shrink;
  const float d = g[i] + s.decay * wi;
  const float mi = s.beta1 * m[i] + s.one_minus_beta1 * d;
  const float vi = s.beta2 * v[i] + s.one_minus_beta2 * d * d;
  m[i] = mi;
  v[i] = vi;
  w[i] = wi - s.lr * (mi / (sqrtf(vi) / s.bias_correction2_sqrt + s.eps));
}

// torch.optim.RMSprop: sq is square_avg, buf the momentum buffer (null
// without momentum), avg the gradient average of the centred form (null
// otherwise).
POSEIDON_HOST_DEVICE inline void rmsprop_element(const UpdateStep& s, float* w, const float* g, float* sq, float* buf,
                                                 float* avg, int64_t i) {
  const float d = g[i] + s.decay * w[i];
  const float sqi = s.alpha * sq[i] + s.one_minus_alpha * d * d;
  sq[i] = sqi;
  float denom;
  if (avg) {
    const float a = s.alpha * avg[i] + s.one_minus_alpha * d;
    avg[i] = a;
    denom = sqrtf(sqi - a * a) + s.eps;
  } else {
    denom = sqrtf(sqi) + s.eps;
  }
  if (buf) {
    const float b = s.momentum * buf[i] + d / denom;
    buf[i] = b;
    w[i] -= s.lr * b;
  } else {
    w[i] -= s.lr * (d / denom);
  }
}

// Where rmsprop's optional slots sit in a packed state of n floats per slot:
// square_avg, then momentum_buffer (with momentum), then grad_avg (centred).
POSEIDON_HOST_DEVICE inline void rmsprop_slots(const UpdateStep& s, float* state, int64_t n, float** buf, float** avg) {
  *buf = s.momentum != 0.f ? state + n : nullptr;
  *avg = s.centered ? state + (*buf ? 2 : 1) * n : nullptr;
}

// The copy of a parameter rounded to bfloat16 that an update writes beside
// its value: as bfloat16 bits for kernels that read bfloat16, or as the
// rounded floats for float32 kernels that multiply bf16's numbers. At most
// one is set; neither where no layer reads a copy.
struct RoundedOut {
  float* floats = nullptr;
  uint16_t* bits = nullptr;
};

// Element i of the copy from w[i], which the update has just written: the
// rounding of core/bf16.h, the one every bf16 path of the engine uses.
POSEIDON_HOST_DEVICE inline void write_rounded(const RoundedOut& out, const float* w, int64_t i) {
  if (out.floats)
    out.floats[i] = from_bf16(to_bf16(w[i]));
  else if (out.bits)
    out.bits[i] = to_bf16(w[i]);
}

}  // namespace poseidon
