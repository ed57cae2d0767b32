// Convolution on the GPU through cuDNN's convolution API. For each input
// shape (made at the first forward with it, kept until the shape changes)
// the layer describes input, filter, output and bias as NCHW float tensors
// and picks one algorithm per direction from cuDNN's heuristics: the best
// ranked that runs with FP32 FMA math (TF32 tensor cores only when the
// context allows them) and whose workspace fits the context's limit, and for
// the two backward directions a deterministic one where there is one.
//
// Gradients follow the CPU layer: backward data adds into the input gradient
// (beta = 1); the weight and bias gradients are overwritten (beta = 0).
#include <climits>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "core/registry.h"
#include "layers/conv.h"

namespace poseidon {

namespace {

// cuDNN's descriptors take int sizes.
int cudnn_int(int64_t v, const std::string& layer) {
  if (v < 0 || v > INT_MAX)
    throw Error(layer + ": convolution size " + std::to_string(v) + " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

// One direction's algorithm with the math type it was ranked for and the
// workspace it needs.
template <class Algo>
struct AlgoChoice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
};

// The first usable entry of cuDNN's ranking (best first). `workspace_of(algo,
// math, &bytes)` says whether the algorithm runs with that math type on this
// shape, and with how much workspace. Deterministic entries are preferred
// when asked; FP16 conversion is never allowed, tensor-core math only with
// TF32 on.
template <class Perf, class WorkspaceOf>
auto choose_algo(const std::vector<Perf>& ranked, bool tf32, bool prefer_deterministic, WorkspaceOf workspace_of,
                 const std::string& what) {
  AlgoChoice<decltype(Perf{}.algo)> choice;
  for (int pass = prefer_deterministic ? 0 : 1; pass < 2; ++pass)
    for (const Perf& p : ranked) {
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (!tf32 && p.mathType == CUDNN_TENSOR_OP_MATH) continue;
      // Without TF32 every call runs with FMA math, also for entries ranked
      // under DEFAULT math, which would let cuDNN use TF32 tensor cores.
      const cudnnMathType_t math = tf32 ? p.mathType : CUDNN_FMA_MATH;
      size_t bytes = 0;
      if (!workspace_of(p.algo, math, &bytes) || bytes > cuda::Context::kWorkspaceLimit) continue;
      choice.algo = p.algo;
      choice.math = math;
      choice.workspace = bytes;
      return choice;
    }
  throw Error(what + ": cuDNN offers no " + (tf32 ? "" : "FP32 (non-TF32) ") + "algorithm within the " +
              std::to_string(cuda::Context::kWorkspaceLimit >> 20) + " MiB workspace limit");
}

class ConvCudaLayer : public ConvLayer {
 public:
  using ConvLayer::ConvLayer;

  ~ConvCudaLayer() override {
    // Destruction may follow a failed call or run at exit: statuses are ignored.
    if (x_desc_) cudnnDestroyTensorDescriptor(x_desc_);
    if (y_desc_) cudnnDestroyTensorDescriptor(y_desc_);
    if (bias_desc_) cudnnDestroyTensorDescriptor(bias_desc_);
    if (w_desc_) cudnnDestroyFilterDescriptor(w_desc_);
    if (conv_desc_) cudnnDestroyConvolutionDescriptor(conv_desc_);
  }

  // The shape checks and parameters of the CPU layer, without its engines.
  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {accept_input(in[0])}; }

  void forward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
    if (io.out[0]->empty()) return;
    cuda::Context& gpu = cuda::Context::get(ctx.device.index);
    plan_for(in_shape_, gpu);
    cudnnHandle_t h = gpu.cudnn();
    const float one = 1.f, zero = 0.f;
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, forward_.math));
    void* ws = gpu.workspace(forward_.workspace);
    POSEIDON_CUDNN_CHECK(cudnnConvolutionForward(h, &one, x_desc_, io.in[0]->data(), w_desc_, param(0).value.data(),
                                                 conv_desc_, forward_.algo, ws, forward_.workspace, &zero, y_desc_,
                                                 io.out[0]->data()));
    if (has_bias_)
      POSEIDON_CUDNN_CHECK(
          cudnnAddTensor(h, &one, bias_desc_, param(1).value.data(), &one, y_desc_, io.out[0]->data()));
  }

  void backward(LayerIO& io, RunContext& ctx) override {
    POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": backward before reshape";
    cuda::Context& gpu = cuda::Context::get(ctx.device.index);
    float* dw = param(0).grad.data();
    float* db = has_bias_ ? param(1).grad.data() : nullptr;
    if (io.in[0]->empty() || io.out_grad[0]->empty()) {
      // No products to sum: the overwritten gradients are zero.
      param(0).grad.zero();
      if (db) param(1).grad.zero();
      return;
    }
    plan_for(in_shape_, gpu);
    cudnnHandle_t h = gpu.cudnn();
    const float one = 1.f, zero = 0.f;
    const float* x = io.in[0]->data();
    const float* dy = io.out_grad[0]->data();
    if (db) POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, y_desc_, dy, &zero, bias_desc_, db));

    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, backward_filter_.math));
    void* ws = gpu.workspace(backward_filter_.workspace);
    POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, x_desc_, x, y_desc_, dy, conv_desc_,
                                                        backward_filter_.algo, ws, backward_filter_.workspace, &zero,
                                                        w_desc_, dw));
    if (!io.in_grad[0]) return;
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, backward_data_.math));
    ws = gpu.workspace(backward_data_.workspace);
    POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, w_desc_, param(0).value.data(), y_desc_, dy, conv_desc_,
                                                      backward_data_.algo, ws, backward_data_.workspace, &one, x_desc_,
                                                      io.in_grad[0]->data()));
  }

 private:
  // Describes the convolution of an input of `shape` and chooses its
  // algorithms, unless that is already done.
  void plan_for(const Shape& shape, cuda::Context& gpu) {
    if (shape == planned_shape_) return;
    planned_shape_.clear();  // until the plan below is complete
    if (!conv_desc_) {
      POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
      POSEIDON_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
    }
    auto to_int = [&](int64_t v) { return cudnn_int(v, name()); };
    const int n = to_int(shape[0]), c = to_int(shape[1]);
    const int out_h = to_int(geom_.out_height()), out_w = to_int(geom_.out_width());
    const int k = to_int(num_output_);
    // Element offsets too must stay within int.
    to_int(shape_numel(shape));
    to_int(n * int64_t(k) * out_h * out_w);
    POSEIDON_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c,
                                                    to_int(shape[2]), to_int(shape[3])));
    POSEIDON_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, out_h, out_w));
    POSEIDON_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, k, 1, 1));
    // The filter's channel count is per group, as in the weight's layout.
    POSEIDON_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k,
                                                    to_int(c / groups_), to_int(kernel_[0]), to_int(kernel_[1])));
    // Cross-correlation (no kernel flip), like the CPU layer and PyTorch.
    POSEIDON_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv_desc_, to_int(pad_[0]), to_int(pad_[1]), to_int(stride_[0]), to_int(stride_[1]), to_int(dilation_[0]),
        to_int(dilation_[1]), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_desc_, to_int(groups_)));
    const bool tf32 = gpu.tf32();
    // The math type the heuristics rank for; each choice then sets its own.
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));

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
    auto ranked_math = [&] {
      POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    };
    auto set_math = [&](cudnnMathType_t math) { POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, math)); };

    int max_count = 0, count = 0;
    POSEIDON_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(max_count);
    POSEIDON_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_, w_desc_, conv_desc_, y_desc_, max_count,
                                                                &count, fwd.data()));
    fwd.resize(count);
    forward_ = choose_algo(
        fwd, tf32, false,
        [&](cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_, y_desc_, algo, bytes) ==
                 CUDNN_STATUS_SUCCESS;
        },
        what + " forward");

    ranked_math();
    POSEIDON_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(max_count);
    POSEIDON_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_, y_desc_, conv_desc_, x_desc_,
                                                                     max_count, &count, data.data()));
    data.resize(count);
    backward_data_ = choose_algo(
        data, tf32, true,
        [&](cudnnConvolutionBwdDataAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_, x_desc_, algo, bytes) ==
                 CUDNN_STATUS_SUCCESS;
        },
        what + " backward data");

    ranked_math();
    POSEIDON_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(max_count);
    POSEIDON_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_, y_desc_, conv_desc_, w_desc_,
                                                                       max_count, &count, filter.data()));
    filter.resize(count);
    backward_filter_ = choose_algo(
        filter, tf32, true,
        [&](cudnnConvolutionBwdFilterAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_, w_desc_, algo,
                                                                bytes) == CUDNN_STATUS_SUCCESS;
        },
        what + " backward filter");
    planned_shape_ = shape;
  }

  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr, bias_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  Shape planned_shape_;  // the input shape the descriptors and choices are for
  AlgoChoice<cudnnConvolutionFwdAlgo_t> forward_;
  AlgoChoice<cudnnConvolutionBwdDataAlgo_t> backward_data_;
  AlgoChoice<cudnnConvolutionBwdFilterAlgo_t> backward_filter_;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ConvCudaLayer, "conv");

}  // namespace poseidon
