// Copies of a layer's operands rounded to bfloat16 (see rounded_operands.h).
#include "layers/rounded_operands.h"

#include "core/precision.h"

namespace poseidon {

void RoundedOperands::prepare(bool active, int64_t input) {
  active_ = active;
  weight_ = nullptr;
  if (active) {
    input_.resize(input);  // grows only: a smaller test batch keeps the room
  } else {
    input_.clear();
    input_.shrink_to_fit();
  }
}

void RoundedOperands::round(const float* x, int64_t x_size, Param& weight) {
  round_to_bf16(x, input_.data(), x_size);
  weight_ = static_cast<const float*>(read_rounded(weight, DType::f32));
}

}  // namespace poseidon
