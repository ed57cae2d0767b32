// The conv layer's oneDNN path, compiled where oneDNN is installed
// (POSEIDON_HAVE_DNNL). oneDNN's direct convolution kernels run in blocked
// channel layouts (nChw16c and the like) at several times the speed of
// im2col + GEMM; the layer's tensors stay NCHW with PyTorch's weight layout,
// so each operand is reordered between the two around the primitive: by
// oneDNN's reorders, or for activations in NHWC or in 16- or 8-channel
// blocks (nChw16c, nChw8c) by the layer's own transposes
// (layers/channel_transpose.h), which run at up to several times their speed.
// Small images (a few output pixels) run as matrix products over the whole
// batch instead (layers/conv_matmul.h), where that measured faster. A
// weight gradient whose oneDNN kernel spins between its threads runs as
// one-thread primitives over parts of the batch (conv_split_weight_grad.h).
//
// Everything that depends on the shape (primitives, reorders, blocked buffers,
// scratchpad) is made once in the constructor; forward and backward only point
// the NCHW memory objects at the caller's tensors and execute.
//
// In bf16 the primitives read x, w and dy in bfloat16 and accumulate in
// float32; they write dw and db in float32, and y and dx rounded to bfloat16
// as autocast's convolution returns them. The weight comes as its rounded
// copy, which the update writes (core/rounded_weight.h), and moves into the
// primitives' layout as it is; backward data reads forward's blocked copy
// where the two layouts agree. The layer's activations are bfloat16 blobs
// (core/blob_types.h), which the moves in and out read and write as they are
// (bfloat16 transposes or reorders, no float32 copy); a float32 one, such as
// a first layer's input, is rounded on its way in. An input gradient added
// onto a bfloat16 one is summed in float32 and rounded once, as
// add_rounded_into_bf16 adds.
#pragma once

#include <memory>

#include "core/im2col.h"
#include "layers/channel_transpose.h"

#ifdef POSEIDON_HAVE_DNNL
#include <dnnl.hpp>
#include <unordered_map>
#endif

namespace poseidon {

class MatmulConv;
class FewChannelWeightGrad;
class SplitWeightGrad;

// A convolution's full shape: one image's geometry plus the batch, the output
// channels, the groups and whether it has a bias; whether it multiplies in
// bfloat16 (precision bf16); and whether forward applies a fused ReLU to y.
// In bf16, bf16_x and bf16_y say that the caller's x and dx, and its y and
// dy, are bfloat16 tensors rather than float32 ones; a shape that runs as
// matrix products (runs_as_matmuls) ignores them: its tensors are float32.
struct DnnlConvShape {
  ConvGeometry geom;
  int64_t batch = 1, num_output = 1, groups = 1;
  bool bias = true;
  bool bf16 = false;
  bool relu = false;
  bool bf16_x = false, bf16_y = false;
};

#ifdef POSEIDON_HAVE_DNNL

class DnnlConv {
 public:
  // Null where oneDNN offers only its reference (naive loop) implementation
  // for this shape, or none (bfloat16 before AVX-512): im2col + GEMM is
  // faster there.
  // Small images run as matrix products instead (conv_matmul.h) where that
  // is faster.
  static std::unique_ptr<DnnlConv> create(const DnnlConvShape& shape);
  ~DnnlConv();
  // Whether the shape runs as matrix products (MatmulConv).
  bool runs_as_matmuls() const { return matmul_ != nullptr; }
  // Over how many parts of the batch the weight gradient runs
  // (conv_split_weight_grad.h); 1 where it runs as one primitive.
  int weight_grad_parts() const;

  // y = conv(x, w) + b, or max(that, 0) with relu; b is ignored without
  // bias. w is float32, or in bf16 the weight's rounded bfloat16 copy
  // (core/rounded_weight.h), which the primitives read as it is. x and y
  // are float32, or bfloat16 as the shape's bf16_x and bf16_y say.
  void forward(const void* x, const void* w, const float* b, void* y);
  // dx += conv_data_grad(dy, w) when dx is not null, or dx = that with
  // overwrite_dx; dw = conv_weight_grad(x, dy) and db = sum of dy (with bias)
  // are overwritten, in float32. Follows a forward() over the same x, whose
  // reordered copy it may reuse. dx has x's type, dy y's.
  void backward(const void* x, const void* w, const void* dy, void* dx, float* dw, float* db, bool overwrite_dx);

 private:
  // A tensor as the layer holds it (plain layout; its handle is pointed at the
  // caller's data on each call) and as a primitive reads or writes it. When
  // the two layouts differ, `blocked` owns a buffer and `convert` reorders
  // between them in the operand's direction.
  // An activation whose blocked layout is NHWC, nChw16c or nChw8c moves
  // through the layer's own transposes (channel_transpose.h) instead of
  // `convert` where they run.
  // A bfloat16 plain tensor that a result is added onto outside the
  // transposes takes it through `staged`, a buffer in its own layout, and
  // add_rounded_into_bf16 (`rounded_add`): oneDNN's summing reorder need
  // not round the sum as that does.
  struct Operand {
    dnnl::memory plain, blocked, staged;
    dnnl::reorder convert;
    dnnl::reorder overwrite;  // Flow::add_out: `convert` without its sum, for a plain tensor with nothing to keep
    bool reordered = false, rounded_add = false;
    bool transposed = false, add = false, bf16 = false;  // add: onto the plain tensor
    bool plain_bf16 = false;                             // transposed: the plain tensor is bfloat16 too
    NhwcShape nhwc;
  };
  enum class Flow { in, out, add_out };  // into the primitive, out of it, or added onto the plain tensor

  explicit DnnlConv(const DnnlConvShape& shape);
  Operand operand(const dnnl::memory::desc& plain, const dnnl::memory::desc& blocked, Flow flow);
  void matmul_weight_grad(const dnnl::memory::desc& x, const dnnl::memory::desc& dy);
  void run_weight_grad_matmul(float* dw);
  void bias_grad(const void* dy, float* db);
  bool nhwc_activation(const dnnl::memory::desc& plain, const dnnl::memory::desc& blocked, Flow flow, Operand& op);
  bool uses_reference_kernels() const;
  // Points the operand at the caller's tensor and, for an input, reorders it
  // into the primitive's layout.
  void load(Operand& op, const void* data);
  void bind(Operand& op, const void* data);
  // Reorders a primitive's result out to the bound plain tensor; with
  // `overwrite`, an add_out operand's result replaces what it holds.
  void flush(Operand& op, bool overwrite = false);
  void run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args);

  DnnlConvShape shape_;
  dnnl::stream stream_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd_;
  dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  size_t scratchpad_bytes_ = 0;
  dnnl::memory scratchpad_;  // shared: the primitives run one at a time

  // Forward operands.
  Operand src_, weights_, bias_, dst_;
  // Backward operands; the input gradient is always computed into its own
  // buffer, then added onto the caller's by a reorder with a sum post-op.
  Operand diff_dst_, bwd_weights_in_, diff_src_;
  bool bwd_shares_weights_ = false;  // bwd_weights_in_ is weights_
  // Backward-weights operands; x and dy are those of the forward and the
  // backward-data primitive when the layouts agree, as they usually do.
  Operand bwdw_src_, bwdw_diff_dst_, diff_weights_, diff_bias_;
  bool bwdw_shares_src_ = false, bwdw_shares_diff_dst_ = false;

  // The whole convolution as matrix products, where set: no direct
  // primitive is made then.
  std::unique_ptr<MatmulConv> matmul_;

  // The weight gradient as a matrix product, where set (see
  // matmul_weight_grad): dy as the matrix it is in NHWC; x as well for a
  // pointwise convolution, else unrolled into matmul_x_'s own buffer. The
  // bias gradient beside it sums the float32 dy into bias_partial_ first.
  dnnl::matmul weight_grad_matmul_;
  dnnl::memory matmul_dy_, matmul_x_, matmul_dw_;
  bool unrolled_x_ = false;
  std::unique_ptr<float[]> bias_partial_;

  // The weight and bias gradients of a stride-1 float32 layer over at most
  // 3 input channels (a first layer), where set: oneDNN's kernels would pad
  // the channels to whole blocks (conv_few_channel_grad.h). No
  // backward-weights primitive, operands or matrix product exist then.
  std::unique_ptr<FewChannelWeightGrad> few_channel_grad_;

  // The weight and bias gradients as one-thread primitives over parts of
  // the batch, where set (conv_split_weight_grad.h): the whole batch's
  // backward-weights primitive spins between its threads. Reads and writes
  // the operands of that primitive, which is not made then.
  std::unique_ptr<SplitWeightGrad> split_weight_grad_;

  std::unordered_map<int, dnnl::memory> fwd_args_, bwd_data_args_, bwd_weights_args_, matmul_args_;
  std::unordered_map<int, dnnl::memory> reorder_args_;
};

#else

// Without oneDNN no convolution has this path: create() always declines, so
// the layer never calls forward or backward.
class DnnlConv {
 public:
  static std::unique_ptr<DnnlConv> create(const DnnlConvShape&) { return nullptr; }
  bool runs_as_matmuls() const { return false; }
  void forward(const void*, const void*, const float*, void*) {}
  void backward(const void*, const void*, const void*, void*, float*, float*, bool) {}
};

#endif  // POSEIDON_HAVE_DNNL

}  // namespace poseidon
