// The bfloat16 copies of weights that the update writes (see rounded_weight.h).
#include "core/rounded_weight.h"

#include "core/blob_types.h"
#include "core/layer.h"
#include "core/precision.h"

namespace poseidon {

RoundedOut rounded_out(Param& p) {
  const Tensor& copy = p.rounded.copy;
  if (!copy.defined() || p.value.is_cuda() || copy.numel() != p.value.numel()) return {};
  if (copy.dtype() == DType::bf16) return {.bits = p.rounded.copy.bf16_data()};
  return {.floats = p.rounded.copy.data()};
}

void mark_rounded(Param& p, const RoundedOut& written) { p.rounded.current = written.floats || written.bits; }

const void* read_rounded(Param& p, DType type) {
  POSEIDON_CHECK(!p.value.is_cuda()) << "parameter '" << p.name << "': a rounded copy is read on the CPU only";
  RoundedWeight& r = p.rounded;
  if (!r.copy.defined() || r.copy.dtype() != type || r.copy.numel() != p.value.numel()) {
    r.copy = Tensor(p.shape, Device{}, type);
    r.current = false;
  }
  if (!r.current) {
    const float* w = p.value.data();
    const int64_t n = p.value.numel();
    if (type == DType::f32)
      round_to_bf16(w, r.copy.data(), n);
    else
      round_into_bf16(w, r.copy.bf16_data(), n);
  }
  r.current = false;
  return rounded_copy(p);
}

const void* rounded_copy(const Param& p) {
  const Tensor& copy = p.rounded.copy;
  POSEIDON_CHECK(copy.defined()) << "parameter '" << p.name << "' has no rounded copy before a forward read it";
  if (copy.dtype() == DType::bf16) return copy.bf16_data();
  return copy.data();
}

void values_written(const std::vector<Param*>& params) {
  for (Param* p : params) p->rounded.current = false;
}

}  // namespace poseidon
