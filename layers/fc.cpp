// Fully connected on the CPU (see fc.h).
#include "layers/fc.h"

#include <algorithm>

#include "core/math.h"
#include "core/registry.h"

namespace poseidon {

FcLayer::FcLayer(const ConfigNode& c) : Layer(c) {
  num_output_ = c.get_int("num_output");
  if (num_output_ < 1) fail("num_output must be at least 1", "num_output");
  has_bias_ = c.get_bool("bias", true);
}

std::vector<Shape> FcLayer::reshape(const std::vector<Shape>& in) {
  const Shape& s = in[0];
  if (s.empty()) fail("expects an input with a batch dimension, got a scalar");
  batch_ = s[0];
  features_ = shape_numel(Shape(s.begin() + 1, s.end()));
  ParamInit init;
  init.fan_in = features_;
  init.fan_out = num_output_;
  declare_param("weight", {num_output_, features_}, init);
  if (has_bias_) declare_param("bias", {num_output_}, init);
  return {{batch_, num_output_}};
}

void FcLayer::forward(LayerIO& io, RunContext&) {
  POSEIDON_CHECK(io.in[0]->numel() == batch_ * features_) << name() << ": forward before reshape";
  float* y = io.out[0]->data();
  gemm(false, true, batch_, num_output_, features_, 1.f, io.in[0]->data(), param(0).value.data(), 0.f, y);
  if (!has_bias_) return;
  const float* b = param(1).value.data();
#pragma omp parallel for if (batch_ * num_output_ > 32768)
  for (int64_t n = 0; n < batch_; ++n) {
    float* row = y + n * num_output_;
#pragma omp simd
    for (int64_t o = 0; o < num_output_; ++o) row[o] += b[o];
  }
}

void FcLayer::backward(LayerIO& io, RunContext&) {
  const float* dy = io.out_grad[0]->data();
  if (io.writes_param_grad(0))
    gemm(true, false, num_output_, features_, batch_, 1.f, dy, io.in[0]->data(), 0.f, param(0).grad.data());
  if (has_bias_) {
    float* db = param(1).grad.data();
    std::fill(db, db + num_output_, 0.f);
    for (int64_t n = 0; n < batch_; ++n) {
      const float* row = dy + n * num_output_;
#pragma omp simd
      for (int64_t o = 0; o < num_output_; ++o) db[o] += row[o];
    }
  }
  if (io.in_grad[0])
    gemm(false, false, batch_, features_, num_output_, 1.f, dy, param(0).value.data(), 1.f, io.in_grad[0]->data());
}

namespace {

std::vector<KeyDoc> fc_keys() {
  std::vector<KeyDoc> keys = {{"num_output", "int", "", "output features"}};
  for (KeyDoc& k : weight_bias_keys()) keys.push_back(std::move(k));
  return keys;
}

}  // namespace

POSEIDON_REGISTER_LAYER(FcLayer, "fc", "fully connected: Y = X W^T + b over the flattened input", fc_keys());

}  // namespace poseidon
