// 2-D convolution on the CPU (see conv.h).
//
// Where oneDNN is built in, its direct convolution runs the layer (see
// layers/conv_dnnl.h), or on small images its matrix products over the
// whole batch (layers/conv_matmul.h). On CPUs where oneDNN's kernels stop at
// AVX2, wide 3x3 convolutions run as Winograd F(4x4, 3x3) instead
// (layers/conv_winograd.h). The im2col path below remains for builds without
// oneDNN, for shapes oneDNN covers only with reference loops, and on request
// (engine: im2col), which also lets tests hold one path against the other.
//
// im2col path: im2col + GEMM. A chunk of the batch (as many images as fit a
// bounded column buffer) is unrolled into one [in*kh*kw, images*out_h*out_w]
// matrix, so each group runs one wide GEMM
//   Y_g[out/groups, images*hw] = W_g[out/groups, in/groups*kh*kw] * col_g,
// whose result is scattered to NCHW. Backward reuses the same layout:
//   dW_g = dY_g * col_g^T,  dcol_g = W_g^T * dY_g, then col2im adds into dX.
// A 1x1, stride-1, unpadded convolution needs no unrolling: the input image
// already is its column matrix, so it runs per-image GEMMs on the tensors.
#include "layers/conv.h"

#include <algorithm>

#include "core/im2col.h"
#include "core/math.h"
#include "core/precision.h"
#include "core/registry.h"
#include "layers/conv_dnnl.h"
#include "layers/conv_subsample.h"
#include "layers/conv_winograd.h"
#include "layers/dnnl_support.h"
#include "layers/relu_kernels.h"

namespace poseidon {

ConvLayer::ConvLayer(const ConfigNode& c) : Layer(c) {
  num_output_ = c.get_int("num_output");
  if (num_output_ < 1) fail("num_output must be at least 1", "num_output");
  kernel_ = read_hw(c, "kernel_size", {0, 0}, 1);
  stride_ = read_hw(c, "stride", {1, 1}, 1);
  pad_ = read_hw(c, "pad", {0, 0}, 0);
  dilation_ = read_hw(c, "dilation", {1, 1}, 1);
  groups_ = c.get_int("groups", 1);
  if (groups_ < 1) fail("groups must be at least 1", "groups");
  if (num_output_ % groups_ != 0)
    fail("groups (" + std::to_string(groups_) + ") must divide num_output (" + std::to_string(num_output_) + ")",
         "groups");
  has_bias_ = c.get_bool("bias", true);
  const std::string engine = c.get_choice("engine", {"auto", "onednn", "winograd", "im2col"}, "auto");
  engine_ = engine == "im2col"     ? Engine::im2col
            : engine == "winograd" ? Engine::winograd
            : engine == "onednn"   ? Engine::onednn
                                   : Engine::automatic;
#ifndef POSEIDON_HAVE_DNNL
  if (engine_ == Engine::onednn) fail("engine onednn: this build has no oneDNN (libdnnl-dev)", "engine");
#endif
}

ConvLayer::~ConvLayer() = default;

Shape ConvLayer::accept_input(const Shape& s) {
  if (s.size() != 4) fail("expects an NCHW input, got shape " + shape_str(s));
  geom_ = geometry(s);
  if (geom_.channels % groups_ != 0)
    fail("groups (" + std::to_string(groups_) + ") must divide the input channels (" + std::to_string(geom_.channels) +
             ")",
         "groups");
  if (!geom_.fits())
    fail("kernel_size " + std::to_string(kernel_[0]) + "x" + std::to_string(kernel_[1]) + " (dilation " +
             std::to_string(dilation_[0]) + "x" + std::to_string(dilation_[1]) + ") is larger than the padded input " +
             std::to_string(s[2] + 2 * pad_[0]) + "x" + std::to_string(s[3] + 2 * pad_[1]),
         "kernel_size");
  if (engine_ == Engine::winograd && !WinogradConv::covers(geom_, groups_))
    fail("engine winograd needs a 3x3 kernel at stride 1, no dilation, one group and pad at most 2", "engine");
  in_shape_ = s;
  batch_ = s[0];
  out_hw_ = geom_.col_cols();

  ParamInit init;
  init.fan_in = geom_.col_rows() / groups_;
  init.fan_out = num_output_ * kernel_[0] * kernel_[1];
  declare_param("weight", {num_output_, geom_.channels / groups_, kernel_[0], kernel_[1]}, init);
  if (has_bias_) declare_param("bias", {num_output_}, init);
  return {batch_, num_output_, geom_.out_height(), geom_.out_width()};
}

std::vector<Shape> ConvLayer::reshape(const std::vector<Shape>& in) {
  Shape out = accept_input(in[0]);
  prepare_cpu_engine();
  return {out};
}

bool ConvLayer::supports_precision(Precision p) const { return p != Precision::tf32; }

std::string ConvLayer::engine() const {
  if (winograd_) return "winograd";
  if (dnnl_) return dnnl_->runs_as_matmuls() ? "onednn matmul" : "onednn";
  return pointwise_ ? "pointwise" : "im2col";
}

bool ConvLayer::fuse_relu() {
  relu_fused_ = true;
  if (batch_ > 0) prepare_cpu_engine();
  return true;
}

// Winograd where asked for; by default for the 3x3 convolutions on CPUs
// where oneDNN's convolutions stop at AVX2 (its own Winograd kernels need
// AVX-512; in bf16 there the float32 engines run, on rounded operands), or
// in builds without oneDNN, of the shapes where it measured faster than
// oneDNN's direct kernels: from 32 channels in and out, on images of at
// least 4x4 outputs. With fewer channels the products are too narrow for
// the transforms to pay, and smaller images run as oneDNN's matrix
// products. bench/conv_engines.sh measures it; docs/BENCHMARK_HISTORY.md has the
// numbers.
bool ConvLayer::uses_winograd() const {
  if (engine_ == Engine::winograd) return true;
  return engine_ == Engine::automatic && WinogradConv::covers(geom_, groups_) && geom_.channels >= 32 &&
         num_output_ >= 32 && geom_.out_height() >= 4 && geom_.out_width() >= 4 && !dnnl_uses_avx512();
}

void ConvLayer::prepare_cpu_engine() {
  dnnl_.reset();  // before its replacement is made: both may be large
  winograd_.reset();
  subsampled_ = false;
  native_bf16_ = direct_bf16_ = false;
  if (uses_winograd()) {
    winograd_ = std::make_unique<WinogradConv>(WinogradShape{.batch = batch_,
                                                             .in_channels = geom_.channels,
                                                             .out_channels = num_output_,
                                                             .height = geom_.height,
                                                             .width = geom_.width,
                                                             .pad_h = pad_[0],
                                                             .pad_w = pad_[1],
                                                             .bias = has_bias_,
                                                             .relu = relu_fused_,
                                                             .bf16_operands = precision() == Precision::bf16});
  } else if (engine_ == Engine::automatic || engine_ == Engine::onednn) {
    DnnlConvShape shape{
        .geom = geom_, .batch = batch_, .num_output = num_output_, .groups = groups_, .bias = has_bias_};
    if (subsample().stride_h * subsample().stride_w > 1 && kernel_ == Hw{1, 1} && pad_ == Hw{0, 0} &&
        dilation_ == Hw{1, 1}) {
      subsampled_ = true;
      shape.geom.height = geom_.out_height();
      shape.geom.width = geom_.out_width();
      shape.geom.stride_h = shape.geom.stride_w = 1;
    }
    shape.relu = relu_fused_;
    // In bf16 oneDNN's bfloat16 kernels run where they are the faster ones
    // (dnnl_runs_bf16_kernels); where those for the shape are reference
    // loops, its float32 kernels run instead.
    shape.bf16 = precision() == Precision::bf16 && dnnl_runs_bf16_kernels();
    // Their direct path takes the blobs as they are; subsampled pixels are
    // a float32 copy.
    shape.bf16_x = shape.bf16 && !subsampled_ && x_type_ == DType::bf16;
    shape.bf16_y = shape.bf16 && !subsampled_ && y_type_ == DType::bf16;
    dnnl_ = DnnlConv::create(shape);
    if (!dnnl_ && shape.bf16) {
      shape.bf16 = shape.bf16_x = shape.bf16_y = false;
      dnnl_ = DnnlConv::create(shape);
    }
    native_bf16_ = dnnl_ && shape.bf16;
    direct_bf16_ = native_bf16_ && !subsampled_ && !dnnl_->runs_as_matmuls();
    subsampled_ = subsampled_ && dnnl_;
  }
  // Winograd rounds x and w as it reads them; the other float32 engines
  // read copies.
  rounds_dy_ = precision() == Precision::bf16 && !native_bf16_;
  bf16_.prepare(rounds_dy_ && !winograd_, batch_ * geom_.image_size());
  x_sub_.resize(subsampled_ ? batch_ * geom_.channels * out_hw_ : 0);
  dx_sub_.resize(x_sub_.size());
  pointwise_ = kernel_ == Hw{1, 1} && stride_ == Hw{1, 1} && pad_ == Hw{0, 0};
  if (dnnl_ || winograd_ || pointwise_) {
    chunk_ = 0;
    col_.clear();
    col_.shrink_to_fit();
    gathered_.clear();
    gathered_.shrink_to_fit();
  } else {
    chunk_ = images_per_chunk(std::max(geom_.col_rows(), num_output_) * out_hw_, batch_);
    col_.resize(geom_.col_rows() * chunk_ * out_hw_);
    gathered_.resize(num_output_ * chunk_ * out_hw_);
  }
}

SubsampleShape ConvLayer::subsample() const {
  return {batch_ * geom_.channels, geom_.height, geom_.width, stride_[0], stride_[1]};
}

ConvGeometry ConvLayer::geometry(const Shape& nchw) const {
  return {.channels = nchw[1],
          .height = nchw[2],
          .width = nchw[3],
          .kernel_h = kernel_[0],
          .kernel_w = kernel_[1],
          .stride_h = stride_[0],
          .stride_w = stride_[1],
          .pad_h = pad_[0],
          .pad_w = pad_[1],
          .dilation_h = dilation_[0],
          .dilation_w = dilation_[1]};
}

// Calls fn(w_g, col_g, gathered_g, out_g, rows_g, cols) for each group of a
// chunk of `images` images: its slice of the weights w, of the column buffer
// and of the gathered output (or output gradient) matrix.
template <class Fn>
void ConvLayer::for_each_group(const float* w, int64_t images, Fn fn) {
  const int64_t cols = images * out_hw_;
  const int64_t rows_g = geom_.col_rows() / groups_, out_g = num_output_ / groups_;
  for (int64_t g = 0; g < groups_; ++g)
    fn(w + g * out_g * rows_g, col_.data() + g * rows_g * cols, gathered_.data() + g * out_g * cols, out_g, rows_g,
       cols);
}

// gathered_ [out, images*hw] -> y [images, out, hw], adding the bias.
void ConvLayer::scatter_to_nchw(int64_t images, float* y) {
  const int64_t cols = images * out_hw_;
  const float* b = has_bias_ ? param(1).value.data() : nullptr;
#pragma omp parallel for collapse(2) if (images * num_output_ * out_hw_ > 32768)
  for (int64_t n = 0; n < images; ++n)
    for (int64_t o = 0; o < num_output_; ++o) {
      const float* src = gathered_.data() + o * cols + n * out_hw_;
      float* dst = y + (n * num_output_ + o) * out_hw_;
      const float bias = b ? b[o] : 0.f;
#pragma omp simd
      for (int64_t p = 0; p < out_hw_; ++p) dst[p] = src[p] + bias;
    }
}

// dy [images, out, hw] -> gathered_ [out, images*hw].
void ConvLayer::gather_from_nchw(int64_t images, const float* dy) {
  const int64_t cols = images * out_hw_;
#pragma omp parallel for collapse(2) if (images * num_output_ * out_hw_ > 32768)
  for (int64_t n = 0; n < images; ++n)
    for (int64_t o = 0; o < num_output_; ++o)
      std::copy_n(dy + (n * num_output_ + o) * out_hw_, out_hw_, gathered_.data() + o * cols + n * out_hw_);
}

void ConvLayer::add_bias(float* y) {
  const float* b = param(1).value.data();
#pragma omp parallel for collapse(2) if (batch_ * num_output_ * out_hw_ > 32768)
  for (int64_t n = 0; n < batch_; ++n)
    for (int64_t o = 0; o < num_output_; ++o) {
      float* dst = y + (n * num_output_ + o) * out_hw_;
#pragma omp simd
      for (int64_t p = 0; p < out_hw_; ++p) dst[p] += b[o];
    }
}

void ConvLayer::bias_grad(const float* dy, float* db) {
#pragma omp parallel for if (batch_ * num_output_ * out_hw_ > 32768)
  for (int64_t o = 0; o < num_output_; ++o) {
    float sum = 0.f;
    for (int64_t n = 0; n < batch_; ++n) {
      const float* src = dy + (n * num_output_ + o) * out_hw_;
#pragma omp simd reduction(+ : sum)
      for (int64_t p = 0; p < out_hw_; ++p) sum += src[p];
    }
    db[o] = sum;
  }
}

// oneDNN's bfloat16 kernels read the weight's rounded copy: the update's
// where it is current, else rounded now (core/rounded_weight.h).
const void* ConvLayer::dnnl_weight() {
  return native_bf16_ ? read_rounded(param(0), DType::bf16) : param(0).value.data();
}

// Backward's weight: in bf16 on oneDNN's kernels the copy forward read.
const void* ConvLayer::rounded_or(const float* w) { return native_bf16_ ? rounded_copy(param(0)) : w; }

namespace {

// A blob's elements, bfloat16 or float32, for an engine that takes either.
const void* elements(const Tensor& t) {
  return t.dtype() == DType::bf16 ? static_cast<const void*>(t.bf16_data()) : t.data();
}
void* elements(Tensor& t) { return t.dtype() == DType::bf16 ? static_cast<void*>(t.bf16_data()) : t.data(); }

}  // namespace

void ConvLayer::follow_blob_types(const LayerIO& io) {
  const DType x = io.in[0]->dtype(), y = io.out[0]->dtype();
  if (!native_bf16_ || (x == x_type_ && y == y_type_)) return;
  x_type_ = x;
  y_type_ = y;
  prepare_cpu_engine();
}

void ConvLayer::forward(LayerIO& io, RunContext&) {
  POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
  follow_blob_types(io);
  if (direct_bf16_) {
    dnnl_->forward(elements(*io.in[0]), dnnl_weight(), has_bias_ ? param(1).value.data() : nullptr,
                   elements(*io.out[0]));
    return;
  }
  float* y = edges_.output(*io.out[0]);
  const float* x = edges_.widen_input(*io.in[0]);
  const float* w = param(0).value.data();
  if (bf16_.active()) {
    bf16_.round(x, io.in[0]->numel(), param(0));
    x = bf16_.input();
    w = bf16_.weight();
  }
  convolve(x, w, y);
  if (relu_fused_ && !dnnl_ && !winograd_) relu_in_place(y, io.out[0]->numel());
  edges_.finish_output(*io.out[0]);
}

void ConvLayer::convolve(const float* x, const float* w, float* y) {
  if (subsampled_) {
    subsample_pixels(x, subsample(), x_sub_.data());
    x = x_sub_.data();
  }
  if (dnnl_) {
    dnnl_->forward(x, dnnl_weight(), has_bias_ ? param(1).value.data() : nullptr, y);
    return;
  }
  if (winograd_) {
    winograd_->forward(x, w, has_bias_ ? param(1).value.data() : nullptr, y);
    return;
  }
  if (pointwise_) {
    const int64_t in_g = geom_.channels / groups_, out_g = num_output_ / groups_;
    for (int64_t n = 0; n < batch_; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        gemm(false, false, out_g, out_hw_, in_g, 1.f, w + g * out_g * in_g,
             x + (n * geom_.channels + g * in_g) * out_hw_, 0.f, y + (n * num_output_ + g * out_g) * out_hw_);
    if (has_bias_) add_bias(y);
    return;
  }
  for (int64_t n0 = 0; n0 < batch_; n0 += chunk_) {
    const int64_t images = std::min(chunk_, batch_ - n0);
    im2col(x + n0 * geom_.image_size(), images, geom_, col_.data());
    for_each_group(w, images,
                   [&](const float* w_g, float* col_g, float* y_g, int64_t out_g, int64_t rows_g, int64_t cols) {
                     gemm(false, false, out_g, cols, rows_g, 1.f, w_g, col_g, 0.f, y_g);
                   });
    scatter_to_nchw(images, y + n0 * num_output_ * out_hw_);
  }
}

void ConvLayer::backward(LayerIO& io, RunContext&) {
  // A fused ReLU's backward turns the output gradient into the gradient at
  // the ReLU's input, in place on the blob of either type: no layer reads
  // it after this one, and a sink that forms a gradient from the blob (SFB)
  // reads it masked.
  if (relu_fused_) {
    Tensor& dy = const_cast<Tensor&>(*io.out_grad[0]);
    if (dy.dtype() == DType::bf16)
      relu_grad_in_place(io.out[0]->bf16_data(), dy.bf16_data(), dy.numel());
    else
      relu_grad_in_place(io.out[0]->data(), dy.data(), dy.numel());
  }
  if (direct_bf16_) {
    // Backward follows a forward over the same blobs, whose types the
    // engine was made for.
    Tensor* dx = io.in_grad[0];
    POSEIDON_CHECK(!dx || dx->dtype() == x_type_) << name() << ": an input gradient of another type than the input";
    dnnl_->backward(elements(*io.in[0]), rounded_copy(param(0)), elements(*io.out_grad[0]),
                    dx ? elements(*dx) : nullptr, param(0).grad.data(), has_bias_ ? param(1).grad.data() : nullptr,
                    io.overwrites_input_grad(0));
    return;
  }
  const float* x = edges_.input(*io.in[0]);
  // Emulated bf16 rounds dy in place: no layer reads it after this one.
  const float* dy = edges_.widen_output_grad(*io.out_grad[0]);
  bool overwrite_dx = io.overwrites_input_grad(0);
  float* dx = edges_.input_grad(io.in_grad[0], overwrite_dx);
  backward_float32(x, dy, dx, overwrite_dx);
  edges_.finish_input_grad(io.in_grad[0], io.overwrites_input_grad(0));
}

void ConvLayer::backward_float32(const float* x, const float* dy, float* dx, bool overwrite_dx) {
  const float* w = param(0).value.data();
  if (rounds_dy_) round_to_bf16(const_cast<float*>(dy), batch_ * num_output_ * out_hw_);
  if (bf16_.active()) {  // the operands' copies are still forward's
    x = bf16_.input();
    w = bf16_.weight();
  }
  float* dw = param(0).grad.data();
  if (subsampled_) {
    // Backward follows a forward over the same x: the copy is still x's.
    dnnl_->backward(x_sub_.data(), rounded_or(w), dy, dx ? dx_sub_.data() : nullptr, dw,
                    has_bias_ ? param(1).grad.data() : nullptr, true);
    if (dx) scatter_pixels(dx_sub_.data(), subsample(), dx, overwrite_dx);
    return;
  }
  if (dnnl_) {
    dnnl_->backward(x, rounded_or(w), dy, dx, dw, has_bias_ ? param(1).grad.data() : nullptr, overwrite_dx);
    return;
  }
  if (winograd_) {
    winograd_->backward(x, w, dy, dx, dw, has_bias_ ? param(1).grad.data() : nullptr, overwrite_dx);
    return;
  }
  if (has_bias_) bias_grad(dy, param(1).grad.data());
  // col2im adds every tap's share: dx starts from zero when it holds nothing.
  if (dx && overwrite_dx && !pointwise_) std::fill_n(dx, batch_ * geom_.image_size(), 0.f);
  if (pointwise_) {
    const int64_t in_g = geom_.channels / groups_, out_g = num_output_ / groups_;
    for (int64_t n = 0; n < batch_; ++n)
      for (int64_t g = 0; g < groups_; ++g) {
        const float* dy_n = dy + (n * num_output_ + g * out_g) * out_hw_;
        const float* x_n = x + (n * geom_.channels + g * in_g) * out_hw_;
        gemm(false, true, out_g, in_g, out_hw_, 1.f, dy_n, x_n, n == 0 ? 0.f : 1.f, dw + g * out_g * in_g);
        if (dx)
          gemm(true, false, in_g, out_hw_, out_g, 1.f, w + g * out_g * in_g, dy_n, overwrite_dx ? 0.f : 1.f,
               dx + (n * geom_.channels + g * in_g) * out_hw_);
      }
    return;
  }
  for (int64_t n0 = 0; n0 < batch_; n0 += chunk_) {
    const int64_t images = std::min(chunk_, batch_ - n0);
    gather_from_nchw(images, dy + n0 * num_output_ * out_hw_);
    im2col(x + n0 * geom_.image_size(), images, geom_, col_.data());
    const float beta = n0 == 0 ? 0.f : 1.f;  // parameter gradients are overwritten
    for_each_group(w, images,
                   [&](const float* w_g, float* col_g, float* dy_g, int64_t out_g, int64_t rows_g, int64_t cols) {
                     float* dw_g = dw + (w_g - w);
                     gemm(false, true, out_g, rows_g, cols, 1.f, dy_g, col_g, beta, dw_g);
                     // The input columns are spent; the buffer now receives their gradient.
                     if (dx) gemm(true, false, rows_g, cols, out_g, 1.f, w_g, dy_g, 0.f, col_g);
                   });
    if (dx) col2im_add(col_.data(), images, geom_, dx + n0 * geom_.image_size());
  }
}

int64_t ConvLayer::forward_flops(const std::vector<Shape>& in) const {
  const ConvGeometry g = geometry(in[0]);
  return 2 * in[0][0] * num_output_ * g.col_cols() * (g.col_rows() / groups_);
}

namespace {

std::vector<KeyDoc> conv_keys() {
  std::vector<KeyDoc> keys = {
      {"num_output", "int", "", "output channels"},
      {"kernel_size", "ints", "", "kernel height and width: one value or [h, w]"},
      {"stride", "ints", "1", "step between windows: one value or [h, w]"},
      {"pad", "ints", "0", "zero padding on each side: one value or [h, w]"},
      {"dilation", "ints", "1", "spacing between kernel taps: one value or [h, w]"},
      {"groups", "int", "1", "split channels into groups convolved separately; divides in and out"},
      {"engine", "string", "auto",
       "auto|onednn|winograd|im2col: the fastest the CPU has (oneDNN where built in, Winograd for wide 3x3 on AVX2 "
       "CPUs, else im2col + GEMM); or oneDNN's direct kernels (im2col for shapes it has only reference loops for); or "
       "Winograd F(4x4,3x3) (3x3, stride 1, float32); or im2col + GEMM. CPU only: GPUs use cuDNN"},
  };
  for (KeyDoc& k : weight_bias_keys()) keys.push_back(std::move(k));
  return keys;
}

}  // namespace

POSEIDON_REGISTER_LAYER(ConvLayer, "conv",
                        "2-D convolution over NCHW input (oneDNN, Winograd, or im2col + GEMM), PyTorch weight layout",
                        conv_keys());

}  // namespace poseidon
