// Copies of a layer's operands rounded to bfloat16 (see rounded_operands.h).
#include "layers/rounded_operands.h"

#include "core/precision.h"

namespace poseidon {

void RoundedOperands::prepare(bool active, int64_t input, int64_t weight) {
  active_ = active;
  for (auto [copy, size] : {std::pair{&input_, input}, {&weight_, weight}})
    if (active) {
      copy->resize(size);  // grows only: a smaller test batch keeps the room
    } else {
      copy->clear();
      copy->shrink_to_fit();
    }
}

void RoundedOperands::round(const float* x, int64_t x_size, const float* w) {
  round_to_bf16(x, input_.data(), x_size);
  round_to_bf16(w, weight_.data(), static_cast<int64_t>(weight_.size()));
}

}  // namespace poseidon
