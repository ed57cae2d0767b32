// Fully connected on the CPU (see fc.h).
#include "layers/fc.h"

#include <algorithm>

#include "core/finite_check.h"
#include "core/math.h"
#include "core/precision.h"
#include "core/registry.h"
#include "layers/dnnl_support.h"
#include "layers/fc_dnnl.h"
#include "layers/relu_kernels.h"

namespace poseidon {

FcLayer::FcLayer(const ConfigNode& c) : Layer(c) {
  num_output_ = c.get_int("num_output");
  if (num_output_ < 1) fail("num_output must be at least 1", "num_output");
  has_bias_ = c.get_bool("bias", true);
  blas_only_ = c.get_choice("engine", {"auto", "blas"}, "auto") == "blas";
}

FcLayer::~FcLayer() = default;

std::vector<Shape> FcLayer::reshape(const std::vector<Shape>& in) {
  Shape out = accept_input(in[0]);
  prepare_cpu_engine();
  return {out};
}

bool FcLayer::fuse_relu() {
  relu_fused_ = true;
  dnnl_cache_.clear();
  if (batch_ > 0) prepare_cpu_engine();
  return true;
}

void FcLayer::prepare_cpu_engine() {
  dnnl_ = nullptr;
  auto dnnl_in = [&](Precision p) {
    std::unique_ptr<DnnlFc>& cached = dnnl_cache_[{batch_, p}];
    if (!cached)
      cached = DnnlFc::create({.batch = batch_,
                               .features = features_,
                               .num_output = num_output_,
                               .bias = has_bias_,
                               .bf16 = p == Precision::bf16,
                               .relu = relu_fused_});
    return cached.get();
  };
  const bool bf16 = precision() == Precision::bf16;
  native_bf16_ = false;
  if (!blas_only_ && batch_ > 0 && features_ > 0) {
    if (bf16 && dnnl_runs_bf16_kernels()) dnnl_ = dnnl_in(Precision::bf16);
    native_bf16_ = dnnl_ != nullptr;
    if (!dnnl_) dnnl_ = dnnl_in(Precision::fp32);
  }
  bf16_.prepare(bf16 && !native_bf16_, batch_ * features_);
}

bool FcLayer::supports_precision(Precision p) const { return p != Precision::tf32; }

Shape FcLayer::accept_input(const Shape& s) {
  if (s.empty()) fail("expects an input with a batch dimension, got a scalar");
  batch_ = s[0];
  features_ = shape_numel(Shape(s.begin() + 1, s.end()));
  ParamInit init;
  init.fan_in = features_;
  init.fan_out = num_output_;
  declare_param("weight", {num_output_, features_}, init);
  if (has_bias_) declare_param("bias", {num_output_}, init);
  return {batch_, num_output_};
}

namespace {
// A blob as oneDNN's bfloat16 products take it: a bfloat16 one in place.
FcOperand operand(const Tensor& t) {
  if (t.dtype() == DType::bf16) return {t.bf16_data(), true};
  return {t.data(), false};
}

float largest(FcOperand m, int64_t n) {
  return m.bf16 ? max_abs_bf16(static_cast<const uint16_t*>(m.data), n) : max_abs(static_cast<const float*>(m.data), n);
}
}  // namespace

void FcLayer::forward(LayerIO& io, RunContext&) {
  POSEIDON_CHECK(io.in[0]->numel() == batch_ * features_) << name() << ": forward before reshape";
  if (native_bf16_) {
    // The weight's rounded copy: the update's where it is current, else
    // rounded now (core/rounded_weight.h).
    float* y = edges_.output(*io.out[0]);
    dnnl_->forward(operand(*io.in[0]), {read_rounded(param(0), DType::bf16), true},
                   has_bias_ ? param(1).value.data() : nullptr, y);
    edges_.finish_output(*io.out[0]);
    return;
  }
  const float* x = edges_.widen_input(*io.in[0]);
  const float* w = param(0).value.data();
  float* y = edges_.output(*io.out[0]);
  if (bf16_.active()) {
    bf16_.round(x, batch_ * features_, param(0));
    x = bf16_.input();
    w = bf16_.weight();
  }
  if (dnnl_) {
    dnnl_->forward({x}, {w}, has_bias_ ? param(1).value.data() : nullptr, y);
  } else {
    gemm(false, true, batch_, num_output_, features_, 1.f, x, w, 0.f, y);
    if (has_bias_) add_bias_on_host(y);
  }
  if (relu_fused_ && !dnnl_) relu_in_place(y, batch_ * num_output_);
  edges_.finish_output(*io.out[0]);
}

void FcLayer::backward(LayerIO& io, RunContext&) {
  // The fused ReLU's mask is applied to a bfloat16 output gradient in
  // place too, as to a float32 one: a sink that forms a gradient from the
  // blob (SFB) reads it masked.
  if (relu_fused_ && io.out_grad[0]->dtype() == DType::bf16)
    relu_grad_in_place(io.out[0]->bf16_data(), const_cast<Tensor*>(io.out_grad[0])->bf16_data(),
                       io.out_grad[0]->numel());
  bool overwrite_dx = io.overwrites_input_grad(0);
  float* dx = edges_.input_grad(io.in_grad[0], overwrite_dx);
  if (native_bf16_) {
    backward_native_bf16(io, dx, overwrite_dx);
    edges_.finish_input_grad(io.in_grad[0], io.overwrites_input_grad(0));
    return;
  }
  backward_float32(edges_.input(*io.in[0]), edges_.widen_output_grad(*io.out_grad[0]),
                   edges_.written_output(*io.out[0]), dx, overwrite_dx, io.writes_param_grad(0));
  edges_.finish_input_grad(io.in_grad[0], io.overwrites_input_grad(0));
}

void FcLayer::backward_float32(const float* x, float* dy, const float* y, float* dx, bool overwrite_dx,
                               bool writes_weight_grad) {
  const float* w = param(0).value.data();
  // A fused ReLU's backward turns the output gradient into the gradient at
  // the ReLU's input, in place, and emulated bf16 rounds it in place: no
  // layer reads it after this one.
  if (relu_fused_) relu_grad_in_place(y, dy, batch_ * num_output_);
  if (bf16_.active()) {  // the operands' copies are still forward's
    round_to_bf16(dy, batch_ * num_output_);
    x = bf16_.input();
    w = bf16_.weight();
  }
  float* dw = writes_weight_grad ? param(0).grad.data() : nullptr;
  float* db = has_bias_ ? param(1).grad.data() : nullptr;
  bound_param_grads(max_abs(x, batch_ * features_), max_abs(dy, batch_ * num_output_), dw != nullptr);
  if (dnnl_) {
    dnnl_->backward({x}, {w}, {dy}, dx, dw, db, overwrite_dx);
    return;
  }
  if (db) bias_grad_on_host(dy, db);
  if (dw) gemm(true, false, num_output_, features_, batch_, 1.f, dy, x, 0.f, dw);
  if (dx) gemm(false, false, batch_, features_, num_output_, 1.f, dy, w, overwrite_dx ? 0.f : 1.f, dx);
}

// oneDNN's bfloat16 products read x and dy from their blobs: bfloat16 ones
// in place (a fused ReLU's mask is already in a bfloat16 dy, as above), and
// the weight's copy that forward read.
void FcLayer::backward_native_bf16(LayerIO& io, float* dx, bool overwrite_dx) {
  FcOperand dy = operand(*io.out_grad[0]);
  if (!dy.bf16) {
    float* floats = const_cast<Tensor*>(io.out_grad[0])->data();
    if (relu_fused_) relu_grad_in_place(edges_.written_output(*io.out[0]), floats, batch_ * num_output_);
  }
  const FcOperand x = operand(*io.in[0]);
  float* dw = io.writes_param_grad(0) ? param(0).grad.data() : nullptr;
  float* db = has_bias_ ? param(1).grad.data() : nullptr;
  bound_param_grads(largest(x, batch_ * features_), largest(dy, batch_ * num_output_), dw != nullptr);
  dnnl_->backward(x, {rounded_copy(param(0)), true}, dy, dx, dw, db, overwrite_dx);
}

// dw[o, f] sums batch_ products dy[n, o] x[n, f], and db[o] batch_ of
// dy[n, o] (times 1): the largest |x| and |dy|, read from the two small
// matrices, bound both (core/finite_check.h), sparing the finite check a
// read of the large weight gradient.
void FcLayer::bound_param_grads(float largest_x, float largest_dy, bool writes_weight_grad) {
  param(0).grad_bounded = writes_weight_grad && product_sums_finite(largest_dy, largest_x, batch_);
  if (has_bias_) param(1).grad_bounded = product_sums_finite(largest_dy, 1.f, batch_);
}

void FcLayer::add_bias_on_host(float* y) {
  const float* b = param(1).value.data();
#pragma omp parallel for if (batch_ * num_output_ > 32768)
  for (int64_t n = 0; n < batch_; ++n) {
    float* row = y + n * num_output_;
#pragma omp simd
    for (int64_t o = 0; o < num_output_; ++o) row[o] += b[o];
  }
}

void FcLayer::bias_grad_on_host(const float* dy, float* db) {
  std::fill(db, db + num_output_, 0.f);
  for (int64_t n = 0; n < batch_; ++n) {
    const float* row = dy + n * num_output_;
#pragma omp simd
    for (int64_t o = 0; o < num_output_; ++o) db[o] += row[o];
  }
}

namespace {

std::vector<KeyDoc> fc_keys() {
  std::vector<KeyDoc> keys = {
      {"num_output", "int", "", "output features"},
      {"engine", "string", "auto",
       "auto: oneDNN matmul where built in, else BLAS; blas: BLAS (float32 products, in bf16 on rounded operands)"}};
  for (KeyDoc& k : weight_bias_keys()) keys.push_back(std::move(k));
  return keys;
}

}  // namespace

POSEIDON_REGISTER_LAYER(FcLayer, "fc", "fully connected: Y = X W^T + b over the flattened input", fc_keys());

}  // namespace poseidon
