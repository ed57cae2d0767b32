// Convolution and fc under bf16 on the CPU write their outputs and input
// gradients as bfloat16 blobs and read bfloat16 inputs and output gradients
// as they come (core/blob_types.h), while their engines other than oneDNN's
// bfloat16 direct convolutions (layers/conv_dnnl.h), which take the blobs as
// they are, read and write float32. These are the edges between the two: a
// bfloat16 input or output gradient widened into a float32 buffer of the
// layer, a float32 result rounded into its bfloat16 blob. On float32 blobs
// every call hands back the blob's own memory and copies nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace poseidon {

class Bf16Edges {
 public:
  // Forward: x as float32. Its widened copy stays for backward's input().
  const float* widen_input(const Tensor& x);
  // Backward: the x of the forward before (a backward follows a forward
  // over the same input).
  const float* input(const Tensor& x) const;
  // Where the engine writes y; finish_output rounds it into a bfloat16 y.
  float* output(Tensor& y);
  void finish_output(Tensor& y) const;
  // The output as the engine wrote it (a fused ReLU's mask in backward).
  const float* written_output(Tensor& y) const;
  // Backward: dy as float32 that the layer may change in place (a fused
  // ReLU's mask): the blob itself, or its widened copy.
  float* widen_output_grad(const Tensor& dy);
  // Where the engine writes dx (null without one). For a bfloat16 dx a
  // buffer that the engine overwrites, so `overwrite` turns true;
  // finish_input_grad then rounds it into dx, adding to what dx holds
  // unless the layer was to overwrite it (`overwrite_blob`).
  float* input_grad(Tensor* dx, bool& overwrite);
  void finish_input_grad(Tensor* dx, bool overwrite_blob) const;
  // The bytes its float32 buffers hold.
  int64_t bytes() const;

 private:
  std::vector<float> x_, y_, dy_, dx_;
};

}  // namespace poseidon
