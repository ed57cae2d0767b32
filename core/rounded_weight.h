// A weight rounded to bfloat16 once per step. Under bf16 a convolution or
// fc on the CPU multiplies its weight rounded to bfloat16 while the master
// weight stays float32 in the Net's flat buffer; rather than each forward
// rounding the weight again, the Solver's update writes the rounded copy
// right after the new float32 value (write_rounded in core/update_rules.h;
// on the CPU bfloat16 bits in a vectorised pass after the update's loop),
// and the layer reads it: oneDNN's bfloat16 kernels the bits, float32
// kernels the rounded floats.
//
// A copy is trusted for one forward: the update that writes it marks it
// current, and the forward that reads it (read_rounded) clears the mark, so
// every other forward (the first, one after an initial fill, a checkpoint's
// load, a parameter server's pull, a gradient check's perturbed weights, a
// second forward without an update) rounds the value itself, into the same
// copy with the same formula. Only a write of parameter values between an
// update and the next forward can leave a current copy stale; code that
// writes there (a checkpoint loaded into a net in training, Python's
// writable views) clears the marks first (values_written).
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/update_rules.h"

namespace poseidon {

struct Param;

struct RoundedWeight {
  // The copy: bfloat16 bits, or float32 holding the rounded values (for
  // float32 kernels that multiply bf16's numbers). Undefined until a layer
  // reads one.
  Tensor copy;
  // Written by the update from the value as it is now, and not read by a
  // forward since.
  bool current = false;
};

// The update's side: where it writes the rounded copy of `p` beside the
// value (nothing where no layer reads one, or on a GPU, whose layers round
// their own operands). After writing it, mark_rounded(p).
RoundedOut rounded_out(Param& p);
void mark_rounded(Param& p, const RoundedOut& written);

// The layer's side, in forward: p's value rounded to bfloat16, as `type`
// (bf16: the bits; f32: the rounded floats). The update's copy where it is
// current, else rounded now; either way it is no longer current after this,
// and stays as it is for backward's reads (rounded_copy) until the next
// update or forward writes it.
const void* read_rounded(Param& p, DType type);
const void* rounded_copy(const Param& p);

// Clears the mark of every parameter in `params`: their values were written
// by something other than the update.
void values_written(const std::vector<Param*>& params);

}  // namespace poseidon
