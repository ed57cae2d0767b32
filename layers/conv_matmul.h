// The conv layer's path for small images (a few output pixels, as in the deep
// layers of VGG at 32x32 input or Inception-V3 at 75x75): the whole batch's
// convolution as three oneDNN matrix products. oneDNN's direct kernels block
// the image into tiles of pixels and channels, and on a 2x2 or 4x4 image most
// of each tile is padding; a matrix product over all the batch's output
// pixels at once (N * out_h * out_w rows) keeps AMX or AVX-512 busy instead.
//
// With K = in * kh * kw, P = out_h * out_w and col the input unrolled to
// [N * P, K] (columns in the weights' in, kh, kw order, so PyTorch's
// [out, in, kh, kw] weights are W[out, K]):
//   forward:        y[N * P, out] = col W^T + b, then into NCHW;
//   backward data:  dcol[N * P, K] = dy W, then col2im added onto dx;
//   backward weights: dW[out, K] = dy^T col, db = sum of dy.
// In bf16 the products read x, W and dy rounded to bfloat16 (W as the
// weight's rounded copy that the update writes, core/rounded_weight.h) and
// write float32; the bias gradient sums the float32 dy the layer receives.
//
// Every buffer and primitive is made in the constructor: a call only points
// the memory objects at the caller's tensors and executes.
#pragma once

#include <memory>

#include "layers/conv_dnnl.h"

#ifdef POSEIDON_HAVE_DNNL

#include <dnnl.hpp>
#include <unordered_map>

namespace poseidon {

// db[c] = sum over n and p of dy[n, c, p] (NCHW, P pixels): first the images
// summed into partial[C * P], a loop over contiguous floats the compiler
// vectorises, then each channel's P pixels. A bfloat16 dy sums as its
// widened float32 copy would, bit for bit.
void conv_bias_grad(const float* dy, int64_t batch, int64_t channels, int64_t pixels, float* partial, float* db);
void conv_bias_grad(const uint16_t* dy, int64_t batch, int64_t channels, int64_t pixels, float* partial, float* db);

class MatmulConv {
 public:
  // Whether the shape runs faster here than on oneDNN's direct kernels (see
  // the measurements at the definition).
  static bool preferred(const DnnlConvShape& shape);
  // Null where oneDNN has no matmul for the shape or only its reference kernel.
  static std::unique_ptr<MatmulConv> create(const DnnlConvShape& shape);

  // The contract of DnnlConv::forward and backward (w float32, or in bf16
  // the weight's rounded bfloat16 copy); backward reuses the unrolled x of
  // the forward before it, which the Layer contract runs over the same
  // input.
  void forward(const float* x, const void* w, const float* b, float* y);
  void backward(const void* w, const float* dy, float* dx, float* dw, float* db, bool overwrite_dx);

 private:
  explicit MatmulConv(const DnnlConvShape& shape);
  // c = a b (+ bias), then max(c, 0) with relu; by the implementation
  // `preferred` names where oneDNN has it (dnnl_matmul).
  dnnl::matmul make(const dnnl::memory::desc& a, const dnnl::memory::desc& b, const dnnl::memory::desc& bias,
                    const dnnl::memory::desc& c, bool relu, const char* preferred = nullptr);
  // Points the products at W: float32, or the rounded bfloat16 copy.
  void load_weights(const void* w);
  void run(const dnnl::matmul& p, const std::unordered_map<int, dnnl::memory>& args);

  DnnlConvShape shape_;
  int64_t rows_ = 0, cols_ = 0, pixels_ = 0;  // N * P, K, P
  dnnl::stream stream_;
  dnnl::matmul forward_, data_grad_, weight_grad_;
  size_t scratchpad_bytes_ = 0;
  bool reference_ = false;  // some product has only oneDNN's reference kernel
  // Owned: the unrolled x, dy as rows, the products' float32 results, the
  // bias-gradient partial sums, the scratchpad. Bound per call: the caller's
  // weights (W and its transposed view), bias and weight gradient.
  dnnl::memory col_, dy_rows_, y_rows_, dcol_, weights_, weights_t_, bias_, dw_, scratchpad_;
  std::unique_ptr<float[]> bias_partial_;
  std::unordered_map<int, dnnl::memory> forward_args_, data_args_, weight_args_;
};

}  // namespace poseidon

#endif  // POSEIDON_HAVE_DNNL
