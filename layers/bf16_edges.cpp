// The float32 edges of bfloat16 blobs around conv and fc (see bf16_edges.h).
#include "layers/bf16_edges.h"

#include "core/blob_types.h"

namespace poseidon {

namespace {
bool bf16(const Tensor& t) { return t.dtype() == DType::bf16; }

const float* widened(const Tensor& t, std::vector<float>& buffer) {
  buffer.resize(t.numel());
  widen_bf16(t.bf16_data(), buffer.data(), t.numel());
  return buffer.data();
}
}  // namespace

const float* Bf16Edges::widen_input(const Tensor& x) { return bf16(x) ? widened(x, x_) : x.data(); }

const float* Bf16Edges::input(const Tensor& x) const { return bf16(x) ? x_.data() : x.data(); }

float* Bf16Edges::output(Tensor& y) {
  if (!bf16(y)) return y.data();
  y_.resize(y.numel());
  return y_.data();
}

void Bf16Edges::finish_output(Tensor& y) const {
  if (bf16(y)) round_into_bf16(y_.data(), y.bf16_data(), y.numel());
}

const float* Bf16Edges::written_output(Tensor& y) const { return bf16(y) ? y_.data() : y.data(); }

float* Bf16Edges::widen_output_grad(const Tensor& dy) {
  // The layer's own reading of its output gradient may change it in place
  // (LayerIO: no layer reads it after the one it feeds).
  return bf16(dy) ? const_cast<float*>(widened(dy, dy_)) : const_cast<float*>(dy.data());
}

float* Bf16Edges::input_grad(Tensor* dx, bool& overwrite) {
  if (!dx) return nullptr;
  if (!bf16(*dx)) return dx->data();
  overwrite = true;
  dx_.resize(dx->numel());
  return dx_.data();
}

void Bf16Edges::finish_input_grad(Tensor* dx, bool overwrite_blob) const {
  if (!dx || !bf16(*dx)) return;
  if (overwrite_blob)
    round_into_bf16(dx_.data(), dx->bf16_data(), dx->numel());
  else
    add_rounded_into_bf16(dx_.data(), dx->bf16_data(), dx->numel());
}

int64_t Bf16Edges::bytes() const {
  return static_cast<int64_t>((x_.capacity() + y_.capacity() + dy_.capacity() + dx_.capacity()) * sizeof(float));
}

}  // namespace poseidon
