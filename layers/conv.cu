// Convolution on the GPU through cuDNN's convolution API. For each input
// shape (made at the first forward with it, kept until the shape changes)
// the layer describes input, filter, output and bias as NCHW float tensors
// and ranks each direction's algorithms by running them once (cuDNN's Find,
// as PyTorch's cudnn.benchmark does), keeping those that run with FP32 FMA
// math (TF32 tensor cores only when the context allows them) and whose
// workspace fits the context's limit, with deterministic ones first for the
// two backward directions. A call cuDNN answers with NOT_SUPPORTED moves on
// to the next algorithm of the ranking.
//
// Gradients follow the CPU layer: backward data adds into the input gradient
// (beta = 1); the weight and bias gradients are overwritten (beta = 0).
#include <algorithm>
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

// One algorithm with the math type it runs with and the workspace it needs.
template <class Algo>
struct AlgoChoice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
};

// One direction's usable algorithms, best first; `at` moves past those that
// cuDNN refuses when they run.
template <class Algo>
struct AlgoRanking {
  std::vector<AlgoChoice<Algo>> usable;
  size_t at = 0;
};

// The usable entries of cuDNN's ranking (best first). `workspace_of(algo,
// math, &bytes)` says whether the algorithm runs with that math type on this
// shape, and with how much workspace. Deterministic entries come first when
// asked; FP16 conversion is never allowed, tensor-core math only with TF32 on.
template <class Perf, class WorkspaceOf>
auto usable_algos(const std::vector<Perf>& ranked, bool tf32, bool prefer_deterministic, WorkspaceOf workspace_of,
                  const std::string& what) {
  AlgoRanking<decltype(Perf{}.algo)> out;
  for (int pass = prefer_deterministic ? 0 : 1; pass < 2; ++pass)
    for (const Perf& p : ranked) {
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (prefer_deterministic && (pass == 0) != (p.determinism == CUDNN_DETERMINISTIC)) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (!tf32 && p.mathType == CUDNN_TENSOR_OP_MATH) continue;
      // Without TF32 every call runs with FMA math, also for entries ranked
      // under DEFAULT math, which would let cuDNN use TF32 tensor cores.
      const cudnnMathType_t math = tf32 ? p.mathType : CUDNN_FMA_MATH;
      size_t bytes = 0;
      if (!workspace_of(p.algo, math, &bytes) || bytes > cuda::Context::kWorkspaceLimit) continue;
      out.usable.push_back({p.algo, math, bytes});
    }
  if (out.usable.empty())
    throw Error(what + ": cuDNN offers no " + (tf32 ? "" : "FP32 (non-TF32) ") + "algorithm within the " +
                std::to_string(cuda::Context::kWorkspaceLimit >> 20) + " MiB workspace limit");
  return out;
}

// Runs `call(choice, workspace)` with the ranking's current algorithm, and
// with the next ones while cuDNN answers NOT_SUPPORTED (it then has written
// nothing, so the retry starts from the same buffers).
template <class Algo, class Call>
void run_ranked(AlgoRanking<Algo>& ranking, cuda::Context& gpu, cudnnConvolutionDescriptor_t conv, Call call,
                const std::string& what) {
  for (; ranking.at < ranking.usable.size(); ++ranking.at) {
    const AlgoChoice<Algo>& c = ranking.usable[ranking.at];
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, c.math));
    const cudnnStatus_t status = call(c, gpu.workspace(c.workspace));
    if (status == CUDNN_STATUS_NOT_SUPPORTED) continue;
    if (status != CUDNN_STATUS_SUCCESS)
      throw Error(what + ": cuDNN error: " + cudnnGetErrorString(status) + " (algorithm " +
                  std::to_string(static_cast<int>(c.algo)) + ")");
    return;
  }
  throw Error(what + ": cuDNN supports none of the " + std::to_string(ranking.usable.size()) +
              " algorithms it ranked for this shape");
}

// The largest workspace, within the limit, that any of the first `count`
// algorithms asks for: what cuDNN's Find may use while it ranks them.
template <class WorkspaceOf>
size_t find_workspace(int count, WorkspaceOf workspace_of) {
  size_t most = 0;
  for (int a = 0; a < count; ++a) {
    size_t bytes = 0;
    if (workspace_of(a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= cuda::Context::kWorkspaceLimit)
      most = std::max(most, bytes);
  }
  return most;
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
    plan_for(io, gpu);
    cudnnHandle_t h = gpu.cudnn();
    const float one = 1.f, zero = 0.f;
    run_ranked(
        forward_, gpu, conv_desc_,
        [&](const auto& c, void* ws) {
          return cudnnConvolutionForward(h, &one, x_desc_, io.in[0]->data(), w_desc_, param(0).value.data(),
                                         conv_desc_, c.algo, ws, c.workspace, &zero, y_desc_, io.out[0]->data());
        },
        name() + " forward");
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
    plan_for(io, gpu);
    cudnnHandle_t h = gpu.cudnn();
    const float one = 1.f, zero = 0.f;
    const float* x = io.in[0]->data();
    const float* dy = io.out_grad[0]->data();
    if (db) POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &one, y_desc_, dy, &zero, bias_desc_, db));
    run_ranked(
        backward_filter_, gpu, conv_desc_,
        [&](const auto& c, void* ws) {
          return cudnnConvolutionBackwardFilter(h, &one, x_desc_, x, y_desc_, dy, conv_desc_, c.algo, ws, c.workspace,
                                                &zero, w_desc_, dw);
        },
        name() + " backward filter");
    if (!io.in_grad[0]) return;
    run_ranked(
        backward_data_, gpu, conv_desc_,
        [&](const auto& c, void* ws) {
          return cudnnConvolutionBackwardData(h, &one, w_desc_, param(0).value.data(), y_desc_, dy, conv_desc_, c.algo,
                                              ws, c.workspace, &one, x_desc_, io.in_grad[0]->data());
        },
        name() + " backward data");
  }

 private:
  // Describes the convolution of the input of `io` and ranks its
  // algorithms, unless that is already done for its shape. The ranking runs
  // them on the layer's own input, weight and output, and on scratch for the
  // gradients (never on the gradients themselves, which backward accumulates
  // into or which may still be on their way to the host).
  void plan_for(const LayerIO& io, cuda::Context& gpu) {
    const Shape& shape = io.in[0]->shape();
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
    // The math type the algorithms are ranked under; each choice then sets its own.
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

    // Scratch for Find: outputs it may overwrite, and the largest workspace
    // any algorithm within the limit asks for.
    Tensor x_scratch(shape, io.in[0]->device());
    Tensor w_scratch(param(0).shape, io.in[0]->device());
    const void* x = io.in[0]->data();
    const void* w = param(0).value.data();
    void* y = io.out[0]->data();  // forward overwrites it anyway
    const void* dy = y;           // any values of the output's shape rank the backward algorithms
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
        fwd, tf32, false,
        [&](cudnnConvolutionFwdAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_, y_desc_, algo, bytes) ==
                 CUDNN_STATUS_SUCCESS;
        },
        what + " forward");

    ranked_math();
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
    ws_bytes = find_workspace(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, [&](int a, size_t* bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_, x_desc_,
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(a), bytes);
    });
    POSEIDON_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, w_desc_, w, y_desc_, dy, conv_desc_, x_desc_, x_scratch.data(),
        static_cast<int>(data.size()), &count, data.data(), gpu.workspace(ws_bytes), ws_bytes));
    data.resize(count);
    backward_data_ = usable_algos(
        data, tf32, true,
        [&](cudnnConvolutionBwdDataAlgo_t algo, cudnnMathType_t math, size_t* bytes) {
          set_math(math);
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_, x_desc_, algo, bytes) ==
                 CUDNN_STATUS_SUCCESS;
        },
        what + " backward data");

    ranked_math();
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
    ws_bytes = find_workspace(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, [&](int a, size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_, w_desc_,
                                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), bytes);
    });
    POSEIDON_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, x_desc_, x, y_desc_, dy, conv_desc_, w_desc_, w_scratch.data(),
        static_cast<int>(filter.size()), &count, filter.data(), gpu.workspace(ws_bytes), ws_bytes));
    filter.resize(count);
    backward_filter_ = usable_algos(
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
  AlgoRanking<cudnnConvolutionFwdAlgo_t> forward_;
  AlgoRanking<cudnnConvolutionBwdDataAlgo_t> backward_data_;
  AlgoRanking<cudnnConvolutionBwdFilterAlgo_t> backward_filter_;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(ConvCudaLayer, "conv");

}  // namespace poseidon
