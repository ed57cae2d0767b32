// oneDNN convolution primitives and the reorders around them (see conv_dnnl.h).
#ifdef POSEIDON_HAVE_DNNL

#include "layers/conv_dnnl.h"

#include <omp.h>

#include <algorithm>

#include "core/blob_types.h"
#include "layers/conv_few_channel_grad.h"
#include "layers/conv_matmul.h"
#include "layers/conv_split_weight_grad.h"
#include "layers/dnnl_support.h"

namespace poseidon {
namespace {

using dnnl::memory;
using Dims = memory::dims;

memory::desc f32(const Dims& dims, memory::format_tag tag) { return {dims, memory::data_type::f32, tag}; }

bool is_layout(const memory::desc& d, memory::format_tag tag) {
  return d == memory::desc(d.dims(), d.data_type(), tag);
}

}  // namespace

std::unique_ptr<DnnlConv> DnnlConv::create(const DnnlConvShape& shape) {
  std::unique_ptr<DnnlConv> conv;
  try {
    conv.reset(new DnnlConv(shape));
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation at all: bfloat16 before AVX-512
  }
  if (conv->uses_reference_kernels()) return nullptr;
  return conv;
}

DnnlConv::~DnnlConv() = default;

DnnlConv::DnnlConv(const DnnlConvShape& s) : shape_(s), stream_(dnnl_cpu_engine()) {
  if (MatmulConv::preferred(s) && (matmul_ = MatmulConv::create(s))) return;
  const ConvGeometry& g = s.geom;
  const memory::format_tag any = memory::format_tag::any;
  const Dims src_dims{s.batch, g.channels, g.height, g.width};
  const Dims dst_dims{s.batch, s.num_output, g.out_height(), g.out_width()};
  // PyTorch's [out, in/groups, kh, kw] is oneDNN's goihw with the group split off.
  const bool grouped = s.groups > 1;
  const Dims weight_dims = grouped
                               ? Dims{s.groups, s.num_output / s.groups, g.channels / s.groups, g.kernel_h, g.kernel_w}
                               : Dims{s.num_output, g.channels, g.kernel_h, g.kernel_w};
  const memory::format_tag weight_tag = grouped ? memory::format_tag::goihw : memory::format_tag::oihw;
  // The caller's activations: float32, or in bf16 its bfloat16 blobs.
  auto activation = [&](const Dims& dims, bool bf16) {
    return memory::desc(dims, s.bf16 && bf16 ? memory::data_type::bf16 : memory::data_type::f32,
                        memory::format_tag::nchw);
  };
  const memory::desc src_plain = activation(src_dims, s.bf16_x);
  const memory::desc dst_plain = activation(dst_dims, s.bf16_y);
  // In bf16 the weight comes as its rounded copy (core/rounded_weight.h):
  // its reorder into the primitives' layout moves bfloat16 as it is.
  const memory::desc weight_plain{weight_dims, s.bf16 ? memory::data_type::bf16 : memory::data_type::f32, weight_tag};
  const memory::desc bias_plain = s.bias ? f32({s.num_output}, memory::format_tag::x) : memory::desc();

  const Dims strides{g.stride_h, g.stride_w};
  const Dims dilates{g.dilation_h - 1, g.dilation_w - 1};  // oneDNN counts the gaps between taps
  // Symmetric padding: oneDNN's output size (in + pad_l + pad_r - extent) / stride + 1
  // then rounds down exactly as PyTorch's does.
  const Dims pad{g.pad_h, g.pad_w};
  const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;  // no Winograd: fp32-exact sums
  const dnnl::primitive_attr attr = dnnl_user_scratchpad();
  // What the primitives read and write: float32, or in precision bf16
  // bfloat16 except for the parameters' gradients (dw, db), which stay
  // float32. y and dx leave in bfloat16 as autocast's convolution returns
  // them, into the layer's tensors as they are or widened for float32 ones.
  const memory::data_type read = s.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::desc src_any{src_dims, read, any}, weight_any{weight_dims, read, any}, dy_any{dst_dims, read, any};

  fwd_pd_ = {{dnnl::prop_kind::forward_training,
              direct,
              src_any,
              weight_any,
              bias_plain,
              {dst_dims, read, any},
              strides,
              dilates,
              pad,
              pad},
             dnnl_forward_attr(s.relu),
             dnnl_cpu_engine()};
  bwd_data_pd_ = {{direct, src_any, weight_any, dy_any, strides, dilates, pad, pad}, attr, dnnl_cpu_engine(), fwd_pd_};
  scratchpad_bytes_ = std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_data_pd_.scratchpad_desc().get_size());
  fwd_ = dnnl::convolution_forward(fwd_pd_);
  bwd_data_ = dnnl::convolution_backward_data(bwd_data_pd_);

  src_ = operand(src_plain, fwd_pd_.src_desc(), Flow::in);
  weights_ = operand(weight_plain, fwd_pd_.weights_desc(), Flow::in);
  dst_ = operand(dst_plain, fwd_pd_.dst_desc(), Flow::out);
  diff_dst_ = operand(dst_plain, bwd_data_pd_.diff_dst_desc(), Flow::in);
  // Backward data reads the forward's reordered weight where the layouts
  // agree (the weights do not change in between).
  bwd_shares_weights_ = bwd_data_pd_.weights_desc() == fwd_pd_.weights_desc();
  bwd_weights_in_ = bwd_shares_weights_ ? weights_ : operand(weight_plain, bwd_data_pd_.weights_desc(), Flow::in);
  diff_src_ = operand(src_plain, bwd_data_pd_.diff_src_desc(), Flow::add_out);
  if (s.bias) bias_ = operand(bias_plain, fwd_pd_.bias_desc(), Flow::in);
  // A float32 first layer's weight gradient needs no oneDNN primitive, nor
  // the channel-padded copies of x and dy that one would read.
  if (!s.bf16 && FewChannelWeightGrad::suits(g, s.groups)) {
    few_channel_grad_ = std::make_unique<FewChannelWeightGrad>(g, s.batch, s.num_output);
  } else {
    bwd_weights_pd_ = {{direct, src_any, f32(weight_dims, any), bias_plain, dy_any, strides, dilates, pad, pad},
                       attr,
                       dnnl_cpu_engine(),
                       fwd_pd_};
    matmul_weight_grad(bwd_weights_pd_.src_desc(), bwd_weights_pd_.diff_dst_desc());
    if (!weight_grad_matmul_ && spins_between_threads(bwd_weights_pd_.impl_info_str(), strides))
      split_weight_grad_ = SplitWeightGrad::create(bwd_weights_pd_, {strides, dilates, pad}, omp_get_max_threads());
    if (!split_weight_grad_) {
      scratchpad_bytes_ = std::max(scratchpad_bytes_, bwd_weights_pd_.scratchpad_desc().get_size());
      bwd_weights_ = dnnl::convolution_backward_weights(bwd_weights_pd_);
    }
    bwdw_shares_src_ = bwd_weights_pd_.src_desc() == fwd_pd_.src_desc();
    bwdw_src_ = bwdw_shares_src_ ? src_ : operand(src_plain, bwd_weights_pd_.src_desc(), Flow::in);
    bwdw_shares_diff_dst_ = bwd_weights_pd_.diff_dst_desc() == bwd_data_pd_.diff_dst_desc();
    bwdw_diff_dst_ = bwdw_shares_diff_dst_ ? diff_dst_ : operand(dst_plain, bwd_weights_pd_.diff_dst_desc(), Flow::in);
    diff_weights_ = operand(f32(weight_dims, weight_tag), bwd_weights_pd_.diff_weights_desc(), Flow::out);
    if (s.bias) diff_bias_ = operand(bias_plain, bwd_weights_pd_.diff_bias_desc(), Flow::out);
  }
  scratchpad_ =
      memory(f32({std::max<int64_t>(1, (scratchpad_bytes_ + 3) / 4)}, memory::format_tag::x), dnnl_cpu_engine());

  fwd_args_ = {{DNNL_ARG_SRC, src_.blocked},
               {DNNL_ARG_WEIGHTS, weights_.blocked},
               {DNNL_ARG_DST, dst_.blocked},
               {DNNL_ARG_SCRATCHPAD, scratchpad_}};
  bwd_data_args_ = {{DNNL_ARG_DIFF_DST, diff_dst_.blocked},
                    {DNNL_ARG_WEIGHTS, bwd_weights_in_.blocked},
                    {DNNL_ARG_DIFF_SRC, diff_src_.blocked},
                    {DNNL_ARG_SCRATCHPAD, scratchpad_}};
  if (s.bias) fwd_args_[DNNL_ARG_BIAS] = bias_.blocked;
  if (!few_channel_grad_) {
    bwd_weights_args_ = {{DNNL_ARG_SRC, bwdw_src_.blocked},
                         {DNNL_ARG_DIFF_DST, bwdw_diff_dst_.blocked},
                         {DNNL_ARG_DIFF_WEIGHTS, diff_weights_.blocked},
                         {DNNL_ARG_SCRATCHPAD, scratchpad_}};
    if (s.bias) bwd_weights_args_[DNNL_ARG_DIFF_BIAS] = diff_bias_.blocked;
  }
  reorder_args_ = {{DNNL_ARG_FROM, memory()}, {DNNL_ARG_TO, memory()}, {DNNL_ARG_SCRATCHPAD, scratchpad_}};
  if (weight_grad_matmul_)
    matmul_args_ = {{DNNL_ARG_SRC, matmul_dy_},
                    {DNNL_ARG_WEIGHTS, matmul_x_},
                    {DNNL_ARG_DST, matmul_dw_},
                    {DNNL_ARG_SCRATCHPAD, scratchpad_}};
}

DnnlConv::Operand DnnlConv::operand(const memory::desc& plain, const memory::desc& blocked, Flow flow) {
  Operand op;
  op.plain = memory(plain, dnnl_cpu_engine(), nullptr);
  // An input gradient is added onto the caller's, which oneDNN's backward
  // data would overwrite: it always lands in a buffer of its own first.
  if (blocked == plain && flow != Flow::add_out) {
    op.blocked = op.plain;
    return op;
  }
  op.reordered = true;
  op.blocked = memory(blocked, dnnl_cpu_engine());
  if (nhwc_activation(plain, blocked, flow, op)) return op;
  auto make = [&](const dnnl::primitive_attr& attr) {
    const dnnl::reorder::primitive_desc pd =
        flow == Flow::in ? dnnl::reorder::primitive_desc(dnnl_cpu_engine(), plain, dnnl_cpu_engine(), blocked, attr)
                         : dnnl::reorder::primitive_desc(dnnl_cpu_engine(), blocked, dnnl_cpu_engine(), plain, attr);
    scratchpad_bytes_ = std::max(scratchpad_bytes_, pd.scratchpad_desc().get_size());
    return dnnl::reorder(pd);
  };
  dnnl::primitive_attr attr = dnnl_user_scratchpad();
  if (flow == Flow::add_out && plain.data_type() == memory::data_type::bf16) {
    op.rounded_add = true;
    op.staged = blocked == plain ? op.blocked : memory(plain, dnnl_cpu_engine());
    op.convert = make(attr);
    return op;
  }
  if (flow == Flow::add_out) {
    op.overwrite = make(attr);
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  op.convert = make(attr);
  return op;
}

// oneDNN 2.6's AMX backward-weights kernel spends 3 to 25 times the
// forward's time on a pointwise convolution (stride 1, no padding), and more
// still on small images (Inception's 1x7 at 3x3 pixels). In NHWC the weight
// gradient is a matrix product over the batch's output pixels: dy is
// [NHW, out], and x is [NHW, in] for a pointwise convolution or unrolled to
// [NHW, in * kh * kw] (columns in the weights' in, kh, kw order) otherwise;
// dw[out, in * kh * kw] = dy^T x, the weights' own layout. oneDNN's matmul
// runs that at about the forward's speed. Unrolling costs kh * kw copies of
// the output pixels, so only on images of at most kMatmulWeightGradPixels of
// them, except for strided 1x1 kernels, where it is a subsampling of x;
// one group, and only where oneDNN has a non-reference matmul for it. The
// bias gradient beside it is summed from the float32 dy (conv_bias_grad).
constexpr int64_t kMatmulWeightGradPixels = 49;  // 7x7

void DnnlConv::matmul_weight_grad(const memory::desc& x, const memory::desc& dy) {
  const ConvGeometry& g = shape_.geom;
  const bool one_by_one = g.kernel_h == 1 && g.kernel_w == 1 && g.pad_h == 0 && g.pad_w == 0;
  const bool pointwise = one_by_one && g.stride_h == 1 && g.stride_w == 1;
  if (shape_.groups != 1 || !is_layout(x, memory::format_tag::nhwc) || !is_layout(dy, memory::format_tag::nhwc) ||
      (!one_by_one && g.col_cols() > kMatmulWeightGradPixels))
    return;
  const int64_t rows = shape_.batch * g.col_cols(), cols = g.channels * g.kernel_h * g.kernel_w;
  const int64_t out = shape_.num_output;
  const memory::desc dy_t({out, rows}, dy.data_type(), Dims{1, out});
  const memory::desc x_rows({rows, cols}, x.data_type(), Dims{cols, 1});
  const memory::desc dw_rows({out, cols}, memory::data_type::f32, Dims{cols, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(dy_t, x_rows, dw_rows), dnnl_user_scratchpad(),
                                        dnnl_cpu_engine());
  if (dnnl_is_reference(pd.impl_info_str())) return;
  scratchpad_bytes_ = std::max(scratchpad_bytes_, pd.scratchpad_desc().get_size());
  weight_grad_matmul_ = dnnl::matmul(pd);
  matmul_dy_ = memory(dy_t, dnnl_cpu_engine(), nullptr);
  unrolled_x_ = !pointwise;
  matmul_x_ = pointwise ? memory(x_rows, dnnl_cpu_engine(), nullptr) : memory(x_rows, dnnl_cpu_engine());
  matmul_dw_ = memory(dw_rows, dnnl_cpu_engine(), nullptr);
  if (shape_.bias) bias_partial_ = std::make_unique<float[]>(out * g.col_cols());
}

namespace {

// x [N, H, W, C] -> col [N * out_h * out_w, C * kh * kw]: each output
// pixel's receptive field, zeros where it overhangs the padding.
template <class T>
void unroll_nhwc(const T* x, const ConvGeometry& g, int64_t batch, T* col) {
  const int64_t out_h = g.out_height(), out_w = g.out_width(), taps = g.kernel_h * g.kernel_w;
  const int64_t row_size = g.channels * taps;
#pragma omp parallel for collapse(2) if (batch * out_h * out_w * row_size > 32768)
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow) {
        T* row = col + ((n * out_h + oh) * out_w + ow) * row_size;
        for (int64_t kh = 0; kh < g.kernel_h; ++kh)
          for (int64_t kw = 0; kw < g.kernel_w; ++kw) {
            const int64_t ih = oh * g.stride_h - g.pad_h + kh * g.dilation_h;
            const int64_t iw = ow * g.stride_w - g.pad_w + kw * g.dilation_w;
            const int64_t tap = kh * g.kernel_w + kw;
            const bool inside = ih >= 0 && ih < g.height && iw >= 0 && iw < g.width;
            const T* pixel = x + ((n * g.height + ih) * g.width + iw) * g.channels;
            for (int64_t c = 0; c < g.channels; ++c) row[c * taps + tap] = inside ? pixel[c] : T(0);
          }
      }
}

}  // namespace

void DnnlConv::run_weight_grad_matmul(float* dw) {
  matmul_dy_.set_data_handle(bwdw_diff_dst_.blocked.get_data_handle());
  void* x = bwdw_src_.blocked.get_data_handle();
  if (!unrolled_x_)
    matmul_x_.set_data_handle(x);
  else if (shape_.bf16)
    unroll_nhwc(static_cast<const uint16_t*>(x), shape_.geom, shape_.batch,
                static_cast<uint16_t*>(matmul_x_.get_data_handle()));
  else
    unroll_nhwc(static_cast<const float*>(x), shape_.geom, shape_.batch,
                static_cast<float*>(matmul_x_.get_data_handle()));
  matmul_dw_.set_data_handle(dw);
  run(weight_grad_matmul_, matmul_args_);
}

// Whether the operand is an NCHW activation (float32, or bfloat16 when the
// primitive's is) that the primitive reads or writes in NHWC or in 16- or
// 8-channel blocks (nChw16c, nChw8c), in float32 or bfloat16, and the
// layer's transposes cover it; if so, sets it
// up for them. nChw16c is NHWC of 16-channel slabs: each image's block of 16
// channels is one image of 16 channels, N * C / 16 of them (and so for 8).
bool DnnlConv::nhwc_activation(const memory::desc& plain, const memory::desc& blocked, Flow flow, Operand& op) {
  if (plain.dims().size() != 4 || !is_layout(plain, memory::format_tag::nchw)) return false;
  const bool bf16 = blocked.data_type() == memory::data_type::bf16;
  const bool plain_bf16 = plain.data_type() == memory::data_type::bf16;
  if (plain_bf16 && !bf16) return false;
  const Dims& dims = plain.dims();
  NhwcShape shape{.batch = dims[0], .channels = dims[1], .pixels = dims[2] * dims[3]};
  const int64_t block = is_layout(blocked, memory::format_tag::nChw16c)  ? 16
                        : is_layout(blocked, memory::format_tag::nChw8c) ? 8
                                                                         : 0;
  if (block > 0 && shape.channels % block == 0)
    shape = NhwcShape{.batch = shape.batch * shape.channels / block, .channels = block, .pixels = shape.pixels};
  else if (!is_layout(blocked, memory::format_tag::nhwc))
    return false;
  if (!nhwc_transpose_supported(shape)) return false;
  op.transposed = true;
  op.add = flow == Flow::add_out;
  op.bf16 = bf16;
  op.plain_bf16 = plain_bf16;
  op.nhwc = shape;
  return true;
}

bool DnnlConv::uses_reference_kernels() const {
  if (matmul_) return false;  // MatmulConv::create checked its own
  return dnnl_is_reference(fwd_pd_.impl_info_str()) || dnnl_is_reference(bwd_data_pd_.impl_info_str()) ||
         (!few_channel_grad_ && dnnl_is_reference(bwd_weights_pd_.impl_info_str()));
}

void DnnlConv::forward(const void* x, const void* w, const float* b, void* y) {
  if (matmul_) return matmul_->forward(static_cast<const float*>(x), w, b, static_cast<float*>(y));
  load(src_, x);
  load(weights_, w);
  if (shape_.bias) load(bias_, b);
  bind(dst_, y);
  run(fwd_, fwd_args_);
  flush(dst_);
  stream_.wait();
}

void DnnlConv::backward(const void* x, const void* w, const void* dy, void* dx, float* dw, float* db,
                        bool overwrite_dx) {
  if (matmul_)
    return matmul_->backward(w, static_cast<const float*>(dy), static_cast<float*>(dx), dw, db, overwrite_dx);
  // Without dx (a first layer) dy goes into blocks only for the weight gradient's primitive.
  if (dx || bwdw_shares_diff_dst_) load(diff_dst_, dy);
  if (dx) {
    if (bwd_shares_weights_)
      bind(bwd_weights_in_, w);  // the forward's reordered copy still holds w
    else
      load(bwd_weights_in_, w);
    run(bwd_data_, bwd_data_args_);
    bind(diff_src_, dx);
    flush(diff_src_, overwrite_dx);
  }
  if (few_channel_grad_) {  // float32 only
    few_channel_grad_->run(static_cast<const float*>(x), static_cast<const float*>(dy), dw, shape_.bias ? db : nullptr);
    stream_.wait();
    return;
  }
  // The Layer contract runs backward after a forward over the same input, so
  // a shared layout still holds x from there.
  if (bwdw_shares_src_)
    bind(bwdw_src_, x);
  else
    load(bwdw_src_, x);
  if (!bwdw_shares_diff_dst_) load(bwdw_diff_dst_, dy);
  if (weight_grad_matmul_) {
    run_weight_grad_matmul(dw);
    if (shape_.bias) bias_grad(dy, db);
    stream_.wait();
    return;
  }
  bind(diff_weights_, dw);
  if (shape_.bias) bind(diff_bias_, db);
  if (split_weight_grad_) {
    stream_.wait();
    split_weight_grad_->run(bwdw_src_.blocked.get_data_handle(), bwdw_diff_dst_.blocked.get_data_handle(),
                            static_cast<float*>(diff_weights_.blocked.get_data_handle()),
                            shape_.bias ? static_cast<float*>(diff_bias_.blocked.get_data_handle()) : nullptr);
  } else {
    run(bwd_weights_, bwd_weights_args_);
  }
  flush(diff_weights_);
  if (shape_.bias) flush(diff_bias_);
  stream_.wait();
}

int DnnlConv::weight_grad_parts() const { return split_weight_grad_ ? split_weight_grad_->parts() : 1; }

void DnnlConv::load(Operand& op, const void* data) {
  op.plain.set_data_handle(const_cast<void*>(data));  // inputs are only read
  if (op.transposed) {
    void* to = op.blocked.get_data_handle();
    if (op.plain_bf16)
      nchw_bf16_to_nhwc_bf16(static_cast<const uint16_t*>(data), op.nhwc, static_cast<uint16_t*>(to));
    else if (op.bf16)
      nchw_to_nhwc_bf16(static_cast<const float*>(data), op.nhwc, static_cast<uint16_t*>(to));
    else
      nchw_to_nhwc(static_cast<const float*>(data), op.nhwc, static_cast<float*>(to));
    return;
  }
  if (!op.reordered) return;
  reorder_args_[DNNL_ARG_FROM] = op.plain;
  reorder_args_[DNNL_ARG_TO] = op.blocked;
  run(op.convert, reorder_args_);
}

void DnnlConv::bind(Operand& op, const void* data) { op.plain.set_data_handle(const_cast<void*>(data)); }

void DnnlConv::flush(Operand& op, bool overwrite) {
  if (op.transposed) {
    const void* from = op.blocked.get_data_handle();
    void* to = op.plain.get_data_handle();
    const bool add = op.add && !overwrite;
    if (op.plain_bf16)
      nhwc_bf16_to_nchw_bf16(static_cast<const uint16_t*>(from), op.nhwc, static_cast<uint16_t*>(to), add);
    else if (op.bf16)
      nhwc_bf16_to_nchw(static_cast<const uint16_t*>(from), op.nhwc, static_cast<float*>(to), add);
    else
      nhwc_to_nchw(static_cast<const float*>(from), op.nhwc, static_cast<float*>(to), add);
    return;
  }
  if (!op.reordered) return;
  reorder_args_[DNNL_ARG_FROM] = op.blocked;
  reorder_args_[DNNL_ARG_TO] = op.rounded_add && !overwrite ? op.staged : op.plain;
  if (op.rounded_add && !overwrite) {
    if (op.staged.get_data_handle() != op.blocked.get_data_handle()) run(op.convert, reorder_args_);
    stream_.wait();
    const int64_t n = static_cast<int64_t>(op.plain.get_desc().get_size() / sizeof(uint16_t));
    add_rounded_into_bf16(static_cast<const uint16_t*>(op.staged.get_data_handle()),
                          static_cast<uint16_t*>(op.plain.get_data_handle()), n);
    return;
  }
  run(overwrite && op.overwrite ? op.overwrite : op.convert, reorder_args_);
}

// db = the sum of dy over the batch and the pixels, from the caller's dy.
void DnnlConv::bias_grad(const void* dy, float* db) {
  const int64_t pixels = shape_.geom.col_cols();
  if (shape_.bf16_y)
    conv_bias_grad(static_cast<const uint16_t*>(dy), shape_.batch, shape_.num_output, pixels, bias_partial_.get(), db);
  else
    conv_bias_grad(static_cast<const float*>(dy), shape_.batch, shape_.num_output, pixels, bias_partial_.get(), db);
}

void DnnlConv::run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
  p.execute(stream_, args);
}

}  // namespace poseidon

#endif  // POSEIDON_HAVE_DNNL
