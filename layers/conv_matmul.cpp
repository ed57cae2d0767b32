// Small-image convolutions as oneDNN matrix products (see conv_matmul.h).
#ifdef POSEIDON_HAVE_DNNL

#include "layers/conv_matmul.h"

#include <algorithm>

#include "core/bf16.h"
#include "layers/dnnl_support.h"

namespace poseidon {
namespace {

using dnnl::memory;
using Dims = memory::dims;

// Stored as the products read it: float32, or bfloat16 as raw 16-bit words.
float store(float v, float*) { return v; }
uint16_t store(float v, uint16_t*) { return to_bf16(v); }

// x [N, C, H, W] -> col [N * P, C * kh * kw]: each output pixel's receptive
// field, zeros where it overhangs the padding.
template <class T>
void unroll_nchw(const float* x, const ConvGeometry& g, int64_t batch, T* col) {
  const int64_t out_w = g.out_width(), pixels = g.col_cols(), taps = g.kernel_h * g.kernel_w;
  const int64_t row_size = g.channels * taps, image = g.channels * g.height * g.width;
#pragma omp parallel for if (batch * pixels * row_size > 32768)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < pixels; ++p) {
      T* row = col + (n * pixels + p) * row_size;
      const int64_t oh = p / out_w, ow = p % out_w;
      for (int64_t kh = 0; kh < g.kernel_h; ++kh)
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
          const int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
          const int64_t tap = kh * g.kernel_w + kw;
          if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) {
            for (int64_t c = 0; c < g.channels; ++c) row[c * taps + tap] = T(0);
            continue;
          }
          const float* pixel = x + n * image + ih * g.width + iw;
          for (int64_t c = 0; c < g.channels; ++c) row[c * taps + tap] = store(pixel[c * g.height * g.width], row);
        }
    }
}

// dx [N, C, H, W] += the col2im of dcol [N * P, C * kh * kw].
void col2im_add_nchw(const float* dcol, const ConvGeometry& g, int64_t batch, float* dx) {
  const int64_t out_w = g.out_width(), pixels = g.col_cols(), taps = g.kernel_h * g.kernel_w;
  const int64_t row_size = g.channels * taps, plane = g.height * g.width;
#pragma omp parallel for if (batch * pixels * row_size > 32768)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < pixels; ++p) {
      const float* row = dcol + (n * pixels + p) * row_size;
      const int64_t oh = p / out_w, ow = p % out_w;
      for (int64_t kh = 0; kh < g.kernel_h; ++kh)
        for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
          const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
          const int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
          if (ih < 0 || ih >= g.height || iw < 0 || iw >= g.width) continue;
          const int64_t tap = kh * g.kernel_w + kw;
          float* pixel = dx + n * g.channels * plane + ih * g.width + iw;
          for (int64_t c = 0; c < g.channels; ++c) pixel[c * plane] += row[c * taps + tap];
        }
    }
}

// [N, C, P] (NCHW) -> rows [N * P, C].
template <class T>
void nchw_to_rows(const float* src, int64_t batch, int64_t channels, int64_t pixels, T* rows) {
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < pixels; ++p) {
      T* row = rows + (n * pixels + p) * channels;
      const float* at = src + n * channels * pixels + p;
      for (int64_t c = 0; c < channels; ++c) row[c] = store(at[c * pixels], row);
    }
}

// rows [N * P, C] -> [N, C, P] (NCHW), overwriting.
void rows_to_nchw(const float* rows, int64_t batch, int64_t channels, int64_t pixels, float* dst) {
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      float* plane = dst + (n * channels + c) * pixels;
      const float* at = rows + n * pixels * channels + c;
      for (int64_t p = 0; p < pixels; ++p) plane[p] = at[p * channels];
    }
}

// Both element types take the same float32 additions in the same order.
template <class T>
void sum_bias_grad(const T* dy, int64_t batch, int64_t channels, int64_t pixels, float* partial, float* db) {
  const int64_t image = channels * pixels;
  for (int64_t i = 0; i < image; ++i) partial[i] = as_float(dy[i]);
  for (int64_t n = 1; n < batch; ++n) {
    const T* src = dy + n * image;
    for (int64_t i = 0; i < image; ++i) partial[i] += as_float(src[i]);
  }
  for (int64_t c = 0; c < channels; ++c) {
    float sum = 0;
    for (int64_t p = 0; p < pixels; ++p) sum += partial[c * pixels + p];
    db[c] = sum;
  }
}

}  // namespace

void conv_bias_grad(const float* dy, int64_t batch, int64_t channels, int64_t pixels, float* partial, float* db) {
  sum_bias_grad(dy, batch, channels, pixels, partial, db);
}

void conv_bias_grad(const uint16_t* dy, int64_t batch, int64_t channels, int64_t pixels, float* partial, float* db) {
  sum_bias_grad(dy, batch, channels, pixels, partial, db);
}

// Measured on an AMX Xeon, 2 threads, batch 32, `poseidon time` per-layer
// tables, fastest of 3 runs under a load of 4 to 5 (forward / backward ms,
// oneDNN direct -> matmul):
//   bf16, VGG19 3x3 512->512 on 2x2 images: 8.5-9.5 / 83-151 -> 4.1-5.7 / 5.8-6.4;
//        on 4x4 images: 10.6-11.5 / 103-130 -> 10.0-12.2 / 13.8-16.2
//        (the forward even; the direct backward, 15 to 17 ms on a quiet
//        machine, stalls under load, the matrix products do not);
//        Inception-V3 at 75: Mixed_6b-e (3x3 images) 24.6 / 52.8 -> 32.0 /
//        43.9 (even in sum), Mixed_7b-c (1x1 images) 22.9 / 39.2 -> 16.8 /
//        17.1, Mixed_5b-d (7x7 images) 11.9 / 35.7 -> 35.5 / 52.4 (slower);
//   fp32, VGG19 on 2x2 images: 6.0-6.6 / 22.4-24.2 -> 5.1-5.7 / 12.7-15.0;
//        on 4x4 images: 15.9 / 40-41 -> 19.3-21.4 / 53-55 (slower);
//        Inception Mixed_6b-e 36.0 / 73.9 -> 48.0 / 87.1 (slower),
//        Mixed_7b-c 19.5 / 66.0 -> 13.1 / 31.2.
// Hence matrix products up to 4x4 output pixels in bf16 and 2x2 in fp32.
constexpr int64_t kMatmulPixelsBf16 = 16, kMatmulPixelsFp32 = 4;

bool MatmulConv::preferred(const DnnlConvShape& s) {
  return s.groups == 1 && s.geom.col_cols() <= (s.bf16 ? kMatmulPixelsBf16 : kMatmulPixelsFp32);
}

std::unique_ptr<MatmulConv> MatmulConv::create(const DnnlConvShape& shape) {
  std::unique_ptr<MatmulConv> conv;
  try {
    conv.reset(new MatmulConv(shape));
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation at all: bfloat16 before AVX-512
  }
  if (conv->reference_) return nullptr;
  return conv;
}

MatmulConv::MatmulConv(const DnnlConvShape& s) : shape_(s), stream_(dnnl_cpu_engine()) {
  const ConvGeometry& g = s.geom;
  pixels_ = g.col_cols();
  rows_ = s.batch * pixels_;
  cols_ = g.channels * g.kernel_h * g.kernel_w;
  const int64_t out = s.num_output;
  const memory::data_type read = s.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::data_type f32 = memory::data_type::f32;
  const memory::desc col({rows_, cols_}, read, Dims{cols_, 1});
  const memory::desc weights({out, cols_}, read, Dims{cols_, 1});
  const memory::desc weights_t({cols_, out}, read, Dims{1, cols_});
  const memory::desc dy_rows({rows_, out}, read, Dims{out, 1});
  const memory::desc dy_t({out, rows_}, read, Dims{1, out});
  const memory::desc y_rows({rows_, out}, f32, Dims{out, 1});
  const memory::desc dcol({rows_, cols_}, f32, Dims{cols_, 1});
  const memory::desc dw({out, cols_}, f32, Dims{cols_, 1});
  const memory::desc bias = s.bias ? memory::desc({1, out}, f32, Dims{out, 1}) : memory::desc();

  forward_ = make(col, weights_t, bias, y_rows, s.relu);
  // In float32 the backward products ask for oneDNN's JIT GEMM (see
  // dnnl_support.h): on an AVX-512 CPU (Intel Xeon, 2 threads), `poseidon
  // time` on VGG19-22K at 32x32, batch 32, alternating, the backward of the
  // 3x3 512->512 layers on 2x2 images took 5.9-6.2 ms with oneDNN's first
  // choice, 4.4-4.8 with it. (On 4x4 images the products stayed behind the
  // direct kernels in float32 even so: forward 8.0-8.3 -> 9.3-10.3 ms,
  // backward 18.0-20.2 -> 18.0-18.9.)
  const char* backward_kernels = s.bf16 ? nullptr : kDnnlFloat32BackwardKernels;
  data_grad_ = make(dy_rows, weights, memory::desc(), dcol, false, backward_kernels);
  weight_grad_ = make(dy_t, col, memory::desc(), dw, false, backward_kernels);
  if (reference_) return;

  const dnnl::engine& engine = dnnl_cpu_engine();
  col_ = memory(col, engine);
  dy_rows_ = memory(dy_rows, engine);
  y_rows_ = memory(y_rows, engine);
  dcol_ = memory(dcol, engine);
  dw_ = memory(dw, engine, nullptr);
  if (s.bias) bias_ = memory(bias, engine, nullptr);
  bias_partial_ = std::make_unique<float[]>(out * pixels_);
  // W (in bf16 the weight's rounded copy, core/rounded_weight.h) read in
  // place, as [out, K] by backward data and as its transpose by forward.
  weights_ = memory(weights, engine, nullptr);
  weights_t_ = memory(weights_t, engine, nullptr);
  scratchpad_ = memory(
      memory::desc({std::max<int64_t>(1, int64_t(scratchpad_bytes_))}, memory::data_type::u8, memory::format_tag::x),
      engine);
  forward_args_ = {{DNNL_ARG_SRC, col_},
                   {DNNL_ARG_WEIGHTS, weights_t_},
                   {DNNL_ARG_DST, y_rows_},
                   {DNNL_ARG_SCRATCHPAD, scratchpad_}};
  if (s.bias) forward_args_[DNNL_ARG_BIAS] = bias_;
  data_args_ = {{DNNL_ARG_SRC, dy_rows_},
                {DNNL_ARG_WEIGHTS, weights_},
                {DNNL_ARG_DST, dcol_},
                {DNNL_ARG_SCRATCHPAD, scratchpad_}};
  weight_args_ = {{DNNL_ARG_SRC, memory(dy_t, engine, dy_rows_.get_data_handle())},
                  {DNNL_ARG_WEIGHTS, col_},
                  {DNNL_ARG_DST, dw_},
                  {DNNL_ARG_SCRATCHPAD, scratchpad_}};
}

dnnl::matmul MatmulConv::make(const memory::desc& a, const memory::desc& b, const memory::desc& bias,
                              const memory::desc& c, bool relu, const char* preferred) {
  const dnnl::matmul::primitive_desc pd =
      dnnl_matmul(dnnl::matmul::desc(a, b, bias, c), dnnl_forward_attr(relu), preferred);
  reference_ = reference_ || dnnl_is_reference(pd.impl_info_str());
  scratchpad_bytes_ = std::max(scratchpad_bytes_, pd.scratchpad_desc().get_size());
  return dnnl::matmul(pd);
}

void MatmulConv::load_weights(const void* w) {
  weights_.set_data_handle(const_cast<void*>(w));  // only read
  weights_t_.set_data_handle(const_cast<void*>(w));
}

void MatmulConv::forward(const float* x, const void* w, const float* b, float* y) {
  if (shape_.bf16)
    unroll_nchw(x, shape_.geom, shape_.batch, static_cast<uint16_t*>(col_.get_data_handle()));
  else
    unroll_nchw(x, shape_.geom, shape_.batch, static_cast<float*>(col_.get_data_handle()));
  load_weights(w);
  if (shape_.bias) bias_.set_data_handle(const_cast<float*>(b));
  run(forward_, forward_args_);
  rows_to_nchw(static_cast<const float*>(y_rows_.get_data_handle()), shape_.batch, shape_.num_output, pixels_, y);
}

void MatmulConv::backward(const void* w, const float* dy, float* dx, float* dw, float* db, bool overwrite_dx) {
  const int64_t out = shape_.num_output;
  if (shape_.bf16)
    nchw_to_rows(dy, shape_.batch, out, pixels_, static_cast<uint16_t*>(dy_rows_.get_data_handle()));
  else
    nchw_to_rows(dy, shape_.batch, out, pixels_, static_cast<float*>(dy_rows_.get_data_handle()));
  if (dx) {
    load_weights(w);
    run(data_grad_, data_args_);
    // Small images: zeroing dx first costs little beside the products.
    if (overwrite_dx) std::fill_n(dx, shape_.batch * shape_.geom.image_size(), 0.f);
    col2im_add_nchw(static_cast<const float*>(dcol_.get_data_handle()), shape_.geom, shape_.batch, dx);
  }
  dw_.set_data_handle(dw);
  run(weight_grad_, weight_args_);
  if (shape_.bias) conv_bias_grad(dy, shape_.batch, out, pixels_, bias_partial_.get(), db);
}

void MatmulConv::run(const dnnl::matmul& p, const std::unordered_map<int, dnnl::memory>& args) {
  p.execute(stream_, args);
  stream_.wait();
}

}  // namespace poseidon

#endif  // POSEIDON_HAVE_DNNL
