// Convolution on the GPU through cuDNN's convolution API. For each input
// shape and math (made at the first forward with them, kept until they
// change) the layer describes input, filter, output and bias as NCHW tensors
// and takes each direction's algorithm from cuDNN's ranking
// (layers/conv_algorithms.h), with deterministic ones first for the two
// backward directions unless the context asks for the fastest
// (cuda::Context::deterministic).
//
// The math: FP32 FMA (TF32 tensor cores only when the context allows them);
// in precision bf16, cuDNN's bfloat16 configuration: input, filter and
// output in bfloat16, float32 accumulation (the convolution's compute type),
// tensor cores. bfloat16 blobs (core/blob_types.h) are cuDNN's operands as
// they are: x and dy are read, y and dx written in place (dx as (dx +
// product) rounded once where it adds: beta 1 in float32). A float32 x or
// dy is rounded into the context's bf16 operand buffers, as w always is,
// and a float32 dx or y (a layer called on float32 tensors) is widened from
// them; dW is widened into the float32 master gradient. The bias is added
// to the bfloat16 product in float32, and its gradient summed from the
// bfloat16 dy.
//
// The bias and a fused ReLU (core/relu_fusion.h): in float32 cuDNN's
// convolution with bias and activation in its epilogue where it applies
// (fused_forward), else one pass of the engine's bias epilogue
// (core/cuda/bias_epilogue.h) over the output, which in bf16 also widens
// the product. In backward a fused ReLU masks the output gradient in place.
// The bias gradient is the engine's channel sums (core/cuda/channel_sums.h):
// many blocks per channel, in a fixed order, the same bits every run.
//
// Gradients follow the CPU layer: backward data adds into the input gradient
// (beta = 1, or the widening adds); the weight and bias gradients are
// overwritten (beta = 0).
#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda/bf16.h"
#include "core/cuda/bias_epilogue.h"
#include "core/cuda/channel_sums.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/conv.h"
#include "layers/conv_algorithms.h"

namespace poseidon {

namespace {

using namespace conv_algorithms;

class ConvCudaLayer : public ConvLayer {
 public:
  using ConvLayer::ConvLayer;
  // dX overwrites where the Net says so (beta 0), as the CPU's does.
  bool writes_input_grads() const override { return true; }
  // Every precision: bf16 was checked against the GPU's compute capability.
  bool supports_precision(Precision) const override { return true; }

  // The ReLU after the convolution is applied in its forward epilogue and,
  // in backward, as a mask on the output gradient.
  bool fuse_relu() override { return relu_fused_ = true; }
  std::string engine() const override { return "cudnn"; }

  ~ConvCudaLayer() override {
    // Destruction may follow a failed call or run at exit: statuses are ignored.
    if (x_desc_) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_) cudnnDestroyTensorDescriptor(y_desc_);
    if (bias_desc_) cudnnDestroyTensorDescriptor(bias_desc_);
    if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
    if (relu_desc_) cudnnDestroyActivationDescriptor(relu_desc_);
    if (identity_desc_) cudnnDestroyActivationDescriptor(identity_desc_);
    if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
  }

  // The shape checks and parameters of the CPU layer, without its engines.
  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {accept_input(in[0])}; }

  void forward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
    if (io.out[0]->empty()) return;
    cuda::Context& gpu = cuda::Context::get(ctx.device.index);
    const Operands op = operands(io, gpu);
    plan_for(io, gpu, op);
    if (fused_forward(gpu, op)) return;
    cudnnHandle_t h = gpu.cudnn();
    const float one = 1.f, zero = 0.f;
    run_ranked(
        forward_, gpu, conv_desc_,
        [&](const auto& c, void* ws) {
          return cudnnConvolutionForward(h, &one, x_desc_, op.x, w_desc_, op.w, conv_desc_, c.algo, ws, c.workspace,
                                         &zero, y_desc_, op.y);
        },
        name() + " forward");
    // The epilogue: bias and ReLU in one pass, in place on a bfloat16 output,
    // or widening a bfloat16 product into a float32 one.
    const float* bias = has_bias_ ? param(1).value.data() : nullptr;
    const size_t images = io.out[0]->shape()[0], channels = num_output_, pixels = out_hw_;
    const bool epilogue = bias || relu_fused_;
    if (io.out[0]->dtype() == DType::bf16) {
      uint16_t* y = io.out[0]->bf16_data();
      if (epilogue) cuda::bias_epilogue(y, y, bias, images, channels, pixels, relu_fused_, gpu.compute());
    } else if (op.bf16) {
      cuda::bias_epilogue(io.out[0]->data(), bf16_bits(op.y), bias, images, channels, pixels, relu_fused_,
                          gpu.compute());
    } else if (epilogue) {
      float* y = io.out[0]->data();
      cuda::bias_epilogue(y, y, bias, images, channels, pixels, relu_fused_, gpu.compute());
    }
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": backward before reshape";
    cuda::Context& gpu = cuda::Context::get(ctx.device.index);
    float* dw = param(0).grad.data();
    float* db = has_bias_ ? param(1).grad.data() : nullptr;
    const bool overwrite_dx = io.in_grad[0] && io.overwrites_input_grad(0);
    if (io.in[0]->empty() || io.out_grad[0]->empty()) {
      // No products to sum: the overwritten gradients are zero.
      param(0).grad.zero();
      if (db) param(1).grad.zero();
      if (overwrite_dx) io.in_grad[0]->zero();
      return;
    }
    const Operands op = operands(io, gpu, false);
    plan_for(io, gpu, op, true);  // may overwrite op.y in bf16: dy is rounded into it after
    cudnnHandle_t h = gpu.cudnn();
    cudaStream_t stream = gpu.compute();
    const float one = 1.f, zero = 0.f;
    const Tensor& out_grad = *io.out_grad[0];
    const bool dy_bf16 = out_grad.dtype() == DType::bf16;
    // A fused ReLU's backward turns the output gradient into the gradient at
    // the ReLU's input, in place, as the CPU layer does: no layer reads it
    // after this one.
    if (relu_fused_ && dy_bf16)
      cuda::relu_mask(io.out[0]->bf16_data(), const_cast<uint16_t*>(out_grad.bf16_data()), out_grad.numel(), stream);
    else if (relu_fused_)
      cuda::relu_mask(io.out[0]->data(), const_cast<float*>(out_grad.data()), out_grad.numel(), stream);
    // dy as cuDNN reads it: the blob itself, or rounded into op.y.
    const void* dy = dy_bf16 ? static_cast<const void*>(out_grad.bf16_data()) : out_grad.data();
    if (op.bf16 && !dy_bf16) {
      cuda::round_to_bf16(bf16_bits(op.y), out_grad.data(), out_grad.numel(), stream);
      dy = op.y;
    }
    const size_t images = out_grad.shape()[0], channels = num_output_, pixels = out_hw_;
    if (db && op.bf16)
      cuda::channel_sums(gpu, db, static_cast<const uint16_t*>(dy), images, channels, pixels);
    else if (db)
      cuda::channel_sums(gpu, db, out_grad.data(), images, channels, pixels);
    void* dw_out = op.bf16 ? op.result : dw;
    run_ranked(
        backward_filter_, gpu, conv_desc_,
        [&](const auto& c, void* ws) {
          return cudnnConvolutionBackwardFilter(h, &one, x_desc_, op.x, y_desc_, dy, conv_desc_, c.algo, ws,
                                                c.workspace, &zero, w_desc_, dw_out);
        },
        name() + " backward filter");
    if (op.bf16) cuda::widen_bf16(dw, bf16_bits(op.result), param(0).grad.numel(), false, stream);
    if (!io.in_grad[0]) return;
    // A bfloat16 dX takes the product in place (beta 1 adds in float32 and
    // rounds once). For a float32 dX in bf16 the product goes to its bf16
    // operand buffer (beta = 0) and its widening adds, or writes where this
    // layer is the first to write dX (as beta 0 does).
    const bool dx_bf16 = io.in_grad[0]->dtype() == DType::bf16;
    const bool via_result = op.bf16 && !dx_bf16;
    void* dx_out = dx_bf16      ? static_cast<void*>(io.in_grad[0]->bf16_data())
                   : via_result ? op.result
                                : io.in_grad[0]->data();
    run_ranked(
        backward_data_, gpu, conv_desc_,
        [&](const auto& c, void* ws) {
          return cudnnConvolutionBackwardData(h, &one, w_desc_, op.w, y_desc_, dy, conv_desc_, c.algo, ws, c.workspace,
                                              via_result || overwrite_dx ? &zero : &one, x_desc_, dx_out);
        },
        name() + " backward data");
    if (via_result)
      cuda::widen_bf16(io.in_grad[0]->data(), bf16_bits(op.result), io.in_grad[0]->numel(), !overwrite_dx, stream);
  }

 private:
  // What the cuDNN calls read and write: the layer's input, weight and
  // output; in precision bf16 the input as it is where it is bfloat16, else
  // the bfloat16 copies in the context's bf16 operand buffers (x and w
  // rounded already; y the output blob where forward writes a bfloat16 one,
  // else a buffer for the output or the rounded output gradient), and a bf16
  // operand buffer for a gradient on its way to its float32 tensor.
  struct Operands {
    bool bf16 = false;
    const void* x = nullptr;
    const void* w = nullptr;
    void* y = nullptr;
    void* result = nullptr;
  };

  static uint16_t* bf16_bits(void* p) { return static_cast<uint16_t*>(p); }

  Operands operands(const LayerIO& io, cuda::Context& gpu, bool forward = true) {
    if (precision() != Precision::bf16)
      return {false, io.in[0]->data(), param(0).value.data(), io.out[0]->data(), nullptr};
    using Slot = cuda::Context::Bf16Operand;
    const Tensor& x = *io.in[0];
    const Tensor& w = param(0).value;
    Tensor& y = *io.out[0];
    auto slot = [&](Slot s, int64_t count) { return gpu.bf16_operand(s, size_t(count) * sizeof(uint16_t)); };
    Operands op{true, nullptr, nullptr,
                forward && y.dtype() == DType::bf16 ? y.bf16_data() : slot(Slot::output, shape_numel(y.shape())),
                slot(Slot::result, std::max(x.numel(), w.numel()))};
    if (x.dtype() == DType::bf16) {
      op.x = x.bf16_data();
    } else {
      void* x16 = slot(Slot::input, x.numel());
      cuda::round_to_bf16(bf16_bits(x16), x.data(), x.numel(), gpu.compute());
      op.x = x16;
    }
    void* w16 = slot(Slot::weight, w.numel());
    cuda::round_to_bf16(bf16_bits(w16), w.data(), w.numel(), gpu.compute());
    op.w = w16;
    return op;
  }

  // cuDNN's convolution with the bias and the activation in its epilogue
  // (cudnnConvolutionBiasActivationForward): for float32 operands with a
  // bias, where a ReLU is fused, or with no activation where the ranked
  // forward algorithm is the implicit precomputed GEMM (the only one cuDNN
  // runs it with). False where it did not run: then the separate epilogue
  // runs, and from then on where cuDNN refused the shape.
  bool fused_forward(cuda::Context& gpu, const Operands& op) {
    if (op.bf16 || !has_bias_ || !fused_forward_usable_ || forward_.at >= forward_.usable.size()) return false;
    const AlgoChoice<cudnnConvolutionFwdAlgo_t>& c = forward_.usable[forward_.at];
    if (!relu_fused_ && c.algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, c.math));
    const float one = 1.f, zero = 0.f;
    // z is y with weight zero: y = act(conv(x, w) + bias).
    const cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
        gpu.cudnn(), &one, x_desc_, op.x, w_desc_, op.w, conv_desc_, c.algo, gpu.workspace(c.workspace), c.workspace,
        &zero, y_desc_, op.y, bias_desc_, param(1).value.data(), relu_fused_ ? relu_desc_ : identity_desc_, y_desc_,
        op.y);
    if (status == CUDNN_STATUS_SUCCESS) return true;
    if (!refused(status))
      throw Error(name() + " fused forward: cuDNN error: " + cudnnGetErrorString(status) + " (algorithm " +
                  std::to_string(static_cast<int>(c.algo)) + ")");
    fused_forward_usable_ = false;  // cuDNN wrote nothing
    return false;
  }

  // Describes the convolution of the input of `io` and ranks its
  // algorithms, unless that is already done for its shape and math. The
  // ranking runs them on the operands `op` (the layer's own input and weight,
  // or their bfloat16 copies; it overwrites op.y, but in a float32
  // backward, where op.y is the forward's output), and on scratch for the
  // gradients (never on the gradients themselves, which backward accumulates
  // into or which may still be on their way to the host).
  void plan_for(const LayerIO& io, cuda::Context& gpu, const Operands& op, bool in_backward = false) {
    const Shape& shape = io.in[0]->shape();
    const ConvMath conv_math = op.bf16 ? ConvMath::bf16 : gpu.tf32() ? ConvMath::tf32 : ConvMath::fp32;
    const bool deterministic = gpu.deterministic();
    if (shape == planned_shape_ && conv_math == planned_math_ && deterministic == planned_deterministic_) return;
    planned_shape_.clear();  // until the plan below is complete
    if (!conv_desc_) {
      POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
      // NaN is not propagated: max(y, 0) as the CPU's y > 0 ? y : 0.
      POSEIDON_CUDNN_CHECK(cudnnCreateActivationDescriptor(&relu_desc_));
      POSEIDON_CUDNN_CHECK(
          cudnnSetActivationDescriptor(relu_desc_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
      POSEIDON_CUDNN_CHECK(cudnnCreateActivationDescriptor(&identity_desc_));
      POSEIDON_CUDNN_CHECK(
          cudnnSetActivationDescriptor(identity_desc_, CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    }
    auto to_int = [&](int64_t v) { return cudnn_int(v, name()); };
    const int n = to_int(shape[0]), c = to_int(shape[1]);
    const int out_h = to_int(geom_.out_height()), out_w = to_int(geom_.out_width());
    const int k = to_int(num_output_);
    // Element offsets too must stay within int.
    to_int(shape_numel(shape));
    to_int(n * int64_t(k) * out_h * out_w);
    // The convolution's operands in its data type; the bias in float32, in
    // which it is added and its gradient summed.
    const cudnnDataType_t type = op.bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    POSEIDON_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NCHW, type, n, c, to_int(shape[2]), to_int(shape[3])));
    POSEIDON_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NCHW, type, n, k, out_h, out_w));
    POSEIDON_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1));
    // The filter's channel count is per group, as in the weight's layout.
    POSEIDON_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, type, CUDNN_TENSOR_NCHW, k, to_int(c / groups_),
                                                    to_int(kernel_[0]), to_int(kernel_[1])));
    // Cross-correlation (no kernel flip), like the CPU layer and PyTorch;
    // float32 accumulation in every math (cuDNN's "pseudo" bfloat16).
    POSEIDON_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv_desc_, to_int(pad_[0]), to_int(pad_[1]), to_int(stride_[0]), to_int(stride_[1]), to_int(dilation_[0]),
        to_int(dilation_[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_desc_, to_int(groups_)));
    // The math type the algorithms are ranked under; each choice then sets its own.
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, ranking_math(conv_math)));

    int dims[4] = {};
    POSEIDON_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_, w_desc_, &dims[0], &dims[1], &dims[2], &dims[3]));
    POSEIDON_CHECK(dims[0] == n && dims[1] == k && dims[2] == out_h && dims[3] == out_w)
        << name() << ": cuDNN's output shape " << dims[0] << "x" << dims[1] << "x" << dims[2] << "x" << dims[3]
        << " differs from the layer's";

    cudnnHandle_t h = gpu.cudnn();
    const std::string what = name() + " (input " + shape_str(shape) + ")";
    // Ranking uses the ranking math type; a candidate's own type is set for
    // its workspace query (and later for its runs).
    auto ranked_math = [&] { POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, ranking_math(conv_math))); };
    auto set_math = [&](cudnnMathType_t math) { POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, math)); };

    // Scratch for Find: outputs it may overwrite (float32 tensors, large
    // enough for bfloat16 too), and the largest workspace any algorithm
    // within the limit asks for.
    Tensor x_scratch(shape, io.in[0]->device());
    Tensor w_scratch(param(0).shape, io.in[0]->device());
    const void* x = op.x;
    const void* w = op.w;
    // Forward overwrites op.y anyway, but for a ranking in backward (the
    // shape, math or determinism changed since forward) in float32, where
    // op.y is the layer's output, which a fused ReLU's mask still reads.
    Tensor y_scratch;
    void* y = op.y;
    if (in_backward && !op.bf16) {
      y_scratch = Tensor(io.out[0]->shape(), io.in[0]->device());
      y = y_scratch.data();
    }
    const void* dy = y;  // any values of the output's shape rank the backward algorithms
    int count = 0;

    ranked_math();
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
    size_t ws_bytes = find_workspace(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, [&](int a, size_t* bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(a), bytes);
    });
    POSEIDON_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, x_desc_, x, w_desc_, w, conv_desc_, y_desc_, y,
                                                                static_cast<int>(fwd.size()), &count, fwd.data(),
                                                                gpu.workspace(ws_bytes), ws_bytes));
    fwd.resize(count);
    forward_ = usable_algos(
        fwd, conv_math, false,
        [&](cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_, y_desc_, algo, bytes) ==
                 CUDNN_STATUS_SUCCESS;
        },
        what + " forward");
    log_ranking(fwd, forward_, what + " forward");

    ranked_math();
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    ws_bytes = find_workspace(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, [&](int a, size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_, x_desc_,
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(a), bytes);
    });
    POSEIDON_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, w_desc_, w, y_desc_, dy, conv_desc_, x_desc_, x_scratch.data(), static_cast<int>(data.size()), &count,
        data.data(), gpu.workspace(ws_bytes), ws_bytes));
    data.resize(count);
    backward_data_ = usable_algos(
        data, conv_math, deterministic,
        [&](cudnnConvolutionBwdDataAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_, x_desc_, algo, bytes) ==
                 CUDNN_STATUS_SUCCESS;
        },
        what + " backward data");
    log_ranking(data, backward_data_, what + " backward data");

    ranked_math();
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
    ws_bytes = find_workspace(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, [&](int a, size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_, w_desc_,
                                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), bytes);
    });
    POSEIDON_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, x_desc_, x, y_desc_, dy, conv_desc_, w_desc_, w_scratch.data(), static_cast<int>(filter.size()), &count,
        filter.data(), gpu.workspace(ws_bytes), ws_bytes));
    filter.resize(count);
    backward_filter_ = usable_algos(
        filter, conv_math, deterministic,
        [&](cudnnConvolutionBwdFilterAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_, w_desc_, algo,
                                                                bytes) == CUDNN_STATUS_SUCCESS;
        },
        what + " backward filter");
    log_ranking(filter, backward_filter_, what + " backward filter");
    fused_forward_usable_ = true;
    planned_shape_ = shape;
    planned_math_ = conv_math;
    planned_deterministic_ = deterministic;
  }

  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, bias_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnActivationDescriptor_t relu_desc_ = nullptr, identity_desc_ = nullptr;
  // Whether cuDNN's fused forward runs for the planned shape (until it refuses).
  bool fused_forward_usable_ = true;
  // The input shape, math and determinism the descriptors and choices are for.
  Shape planned_shape_;
  ConvMath planned_math_ = ConvMath::fp32;
  bool planned_deterministic_ = true;
  AlgoRanking<cudnnConvolutionFwdAlgo_t> forward_;
  AlgoRanking<cudnnConvolutionBwdDataAlgo_t> backward_data_;
  AlgoRanking<cudnnConvolutionBwdFilterAlgo_t> backward_filter_;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ConvCudaLayer, "conv");

}  // namespace poseidon
