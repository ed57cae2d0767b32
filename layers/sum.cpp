// Sum on the CPU (see sum.h).
#include "layers/sum.h"

#include <vector>

#include "core/registry.h"
#include "layers/cpu_vector.h"
#include "layers/relu_kernels.h"
#include "layers/sum_bf16.h"

namespace poseidon {

SumLayer::SumLayer(const ConfigNode& config) : Layer(config) {
  if (auto node = config.find("coefficients")) {
    if (!node->is_sequence()) node->fail("expected a list of numbers, one per input");
    for (size_t i = 0; i < node->size(); ++i) coefficients_.push_back(static_cast<float>(node->at(i).as_double()));
  }
}

std::vector<Shape> SumLayer::reshape(const std::vector<Shape>& in) {
  for (size_t k = 1; k < in.size(); ++k)
    if (in[k] != in[0])
      fail("input " + std::to_string(k) + " has shape " + shape_str(in[k]) + " but input 0 has " + shape_str(in[0]) +
           "; all inputs must have the same shape");
  if (config().has("coefficients")) {
    if (coefficients_.size() != in.size())
      fail("has " + std::to_string(coefficients_.size()) + " coefficients for " + std::to_string(in.size()) +
               " inputs; give one per input",
           "coefficients");
  } else {
    coefficients_.assign(in.size(), 1.f);
  }
  return {in[0]};
}

namespace {

POSEIDON_VECTOR_CLONES void scale_range(float c, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = c * x[i];
}

POSEIDON_VECTOR_CLONES void sum2_range(float c0, const float* x0, float c1, const float* x1, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = c0 * x0[i] + c1 * x1[i];
}

POSEIDON_VECTOR_CLONES void add_scaled_range(float c, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += c * x[i];
}

}  // namespace

// bfloat16 blobs (core/blob_types.h): widened, summed in float32, rounded
// once (layers/sum_bf16.h).
void SumLayer::forward_bf16(LayerIO& io) {
  bf16_inputs_.clear();  // keeps its capacity: steps allocate nothing
  for (const Tensor* t : io.in) bf16_inputs_.push_back(t->bf16_data());
  uint16_t* y = io.out[0]->bf16_data();
  parallel_chunks(io.out[0]->numel(), [&](int64_t begin, int64_t end) {
    sum_bf16_range(bf16_inputs_.data(), begin, coefficients_.data(), bf16_inputs_.size(), relu_fused_, y + begin,
                   end - begin);
  });
}

void SumLayer::backward_bf16(LayerIO& io) const {
  const uint16_t* dy = io.out_grad[0]->bf16_data();
  // The output is positive where the fused ReLU's input was.
  const uint16_t* y = relu_fused_ ? io.out[0]->bf16_data() : nullptr;
  parallel_chunks(io.out_grad[0]->numel(), [&](int64_t begin, int64_t end) {
    for (size_t k = 0; k < io.in.size(); ++k)
      if (io.in_grad[k])
        share_bf16_range(dy + begin, y ? y + begin : nullptr, coefficients_[k], io.in_grad[k]->bf16_data() + begin,
                         io.overwrites_input_grad(k), end - begin);
  });
}

// Chunk by chunk, every input at once: the chunk of y (forward) or dy
// (backward) stays in cache while each input adds to it or reads it.
void SumLayer::forward(LayerIO& io, RunContext&) {
  if (io.out[0]->dtype() == DType::bf16) return forward_bf16(io);
  float* y = io.out[0]->data();
  parallel_chunks(io.out[0]->numel(), [&](int64_t begin, int64_t end) {
    const int64_t n = end - begin;
    size_t k = 1;
    if (io.in.size() == 1) {
      scale_range(coefficients_[0], io.in[0]->data() + begin, y + begin, n);
    } else {
      // The first two inputs in one pass: a residual sum is all of the work,
      // and a pass of its own for the first input would add a third to it.
      sum2_range(coefficients_[0], io.in[0]->data() + begin, coefficients_[1], io.in[1]->data() + begin, y + begin, n);
      k = 2;
    }
    for (; k < io.in.size(); ++k) add_scaled_range(coefficients_[k], io.in[k]->data() + begin, y + begin, n);
    // On the chunk while it is in cache: no pass over memory of its own.
    if (relu_fused_) relu_range_in_place(y + begin, n);
  });
}

void SumLayer::backward(LayerIO& io, RunContext&) {
  if (io.out_grad[0]->dtype() == DType::bf16) return backward_bf16(io);
  const float* dy = io.out_grad[0]->data();
  // A fused ReLU's backward turns the output gradient into the gradient at
  // the ReLU's input, chunk by chunk in place: no layer reads it after this
  // one (core/relu_fusion.h).
  float* relu_dy = relu_fused_ ? const_cast<float*>(dy) : nullptr;
  parallel_chunks(io.out_grad[0]->numel(), [&](int64_t begin, int64_t end) {
    if (relu_dy) relu_grad_range_in_place(io.out[0]->data() + begin, relu_dy + begin, end - begin);
    for (size_t k = 0; k < io.in.size(); ++k) {
      if (!io.in_grad[k]) continue;
      float* dx = io.in_grad[k]->data() + begin;
      if (io.overwrites_input_grad(k))
        scale_range(coefficients_[k], dy + begin, dx, end - begin);
      else
        add_scaled_range(coefficients_[k], dy + begin, dx, end - begin);
    }
  });
}

POSEIDON_REGISTER_LAYER(SumLayer, "sum", "element-wise weighted sum of inputs of equal shape",
                        {{"coefficients", "floats", "[1, 1, ...]", "one multiplier per input, in input order"}});

}  // namespace poseidon
