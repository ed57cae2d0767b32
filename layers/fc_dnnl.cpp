// oneDNN matmul primitives of the fc layer (see fc_dnnl.h).
#ifdef POSEIDON_HAVE_DNNL

#include "layers/fc_dnnl.h"

#include <algorithm>
#include <cstdint>

#include "core/bf16.h"
#include "core/math.h"
#include "layers/bf16_pack.h"
#include "layers/dnnl_support.h"
#include "layers/small_batch_weight_grad.h"

namespace poseidon {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// A row-major [rows, cols] matrix (Tag::ab), or the transpose of a row-major
// [cols, rows] one read in place (Tag::ba).
memory::desc matrix(int64_t rows, int64_t cols, memory::data_type type, Tag tag) { return {{rows, cols}, type, tag}; }

// Whether dX = dY W runs through BLAS (core/math.h gemm) rather than
// oneDNN: in float32 on CPUs where oneDNN's kernels stop at AVX2, whose
// matmul with W read row-major took up to half as long again as OpenBLAS's
// on the products of the fc layers, except on small ones. Measured on an
// AVX2 CPU (AMD Zen 3, 2 threads), `poseidon time` alternating the two
// (fastest of 3 to 7), backward of the layer, oneDNN vs BLAS for dX, ms:
//   N=128 F=2048  O=2048   22.0 vs 16.7   (models/mlp_2048.yaml)
//   N=32  F=25088 O=4096  111.7 vs 106.8  (VGG19-22K at 32x32, classifier.0)
//   N=32  F=4096  O=4096   25.5 vs 17.7
//   N=32  F=4096  O=21841 131.6 vs 100.5  (with dY read in place by dW too)
//   N=64  F=1024  O=1024    3.20 vs 2.61
//   N=64  F=1024  O=512     1.63 vs 1.40
//   N=128 F=512   O=256     0.90 vs 0.76
//   N=64  F=512   O=256     0.44 vs 0.46
//   N=64  F=800   O=500     1.18 vs 1.47  (models/lenet.yaml, fc1)
//   N=128 F=2048  O=10      0.30 vs 0.48
// Hence BLAS from O=512 and N*F*O of 2^25 multiply-adds on.
bool blas_backward_data(const DnnlFcShape& s) {
  return !s.bf16 && !dnnl_uses_avx512() && s.num_output >= 512 &&
         s.batch * s.features * s.num_output >= (int64_t{1} << 25);
}

// Whether the backward products read dY[N,O] from a column-major copy (Tag::ba
// over an [O,N] buffer) rather than in place. oneDNN's float32 backward data
// kernel runs much slower with a row-major dY once O is large; the copy costs
// O*N floats, next to the product's O*F*N multiply-adds. Measured with 1 and 2
// threads (load 1.2-1.3), dx += dY W with the copy included, column-major over
// row-major time:
//   N=32  F=25088 O=4096   0.62-0.63   (VGG19's classifier.0)
//   N=128 F=25088 O=4096   0.51-0.52
//   N=32  F=4096  O=21841  0.73-0.74   (VGG19-22K's classifier.6)
//   N=8   F=4096  O=4096   0.84-0.85
//   N=32  F=4096  O=4096   0.87-0.89
//   N=32  F=2048  O=2048   0.93-0.98
//   N=128 F=2048  O=2048   0.97-0.99
//   N=32  F=4096  O=1000   0.94-1.00
//   N=64  F=800   O=500    1.03-1.07
// Backward weights, dW = dY^T X, reads the same copy row-major, no slower
// than dY in place (1 thread, N=32: O=4096 F=25088 139 vs 140 ms; O=21841
// F=4096 121 vs 123). At O=2048 the gain is within the machine's noise, and
// `poseidon time` on models/mlp_2048.yaml (O=2048, N=128) showed none, so the
// copy starts at O=4096. In bf16 the layouts run alike (within 5%, either
// way), and at N=1 both layouts are the same bytes.
bool dy_column_major(const DnnlFcShape& s) {
  return !s.bf16 && s.batch > 1 && s.num_output >= 4096 && !blas_backward_data(s);
}

// Matrices of at most this many floats are rounded to bfloat16 by a loop on
// the calling thread rather than by oneDNN's reorder, whose threads, idle
// between layers, take longer to wake than the loop takes. Measured with 2
// threads (load 1.0), each call after 2 ms idle, median of 40, reorder vs
// loop: 5000 floats 87 vs 3 us, 32000 101 vs 18, 51200 102 vs 31, 131072 123
// vs 90, 400000 184 vs 285.
constexpr int64_t kSerialRoundingFloats = 131072;

}  // namespace

std::unique_ptr<DnnlFc> DnnlFc::create(const DnnlFcShape& shape) {
  std::unique_ptr<DnnlFc> fc;
  try {
    fc.reset(new DnnlFc(shape));
  } catch (const dnnl::error&) {
    return nullptr;  // no implementation at all: bfloat16 before AVX-512
  }
  if (fc->reference_) return nullptr;
  return fc;
}

DnnlFc::DnnlFc(const DnnlFcShape& s) : shape_(s), stream_(dnnl_cpu_engine()) {
  const int64_t n = s.batch, f = s.features, o = s.num_output;
  const memory::data_type f32 = memory::data_type::f32;
  const memory::data_type read = s.bf16 ? memory::data_type::bf16 : f32;
  // The float32 backward products ask oneDNN for its JIT GEMM
  // (kDnnlFloat32BackwardKernels), where on AVX-512 its first choice is its
  // brgemm kernels, which took up to three times as long on them. Measured
  // on an AVX-512 CPU (Intel Xeon, 2 threads, load 0.7), bench/fc_kernels.sh,
  // each product alone, median of 15, brgemm vs JIT GEMM, ms:
  //   dX  N=128 F=3072  O=2048   19.2 vs 5.6   (models/mlp_2048.yaml, fc1)
  //   dW  N=128 F=3072  O=2048    6.9 vs 4.7
  //   dX  N=128 F=2048  O=2048    3.7 vs 3.7   (fc2, fc3)
  //   dW  N=128 F=2048  O=2048    3.5 vs 3.2
  //   dW  N=32  F=25088 O=4096   73.2 vs 30.4  (VGG19-22K at 32x32, classifier.0)
  //   dW  N=32  F=4096  O=21841  63.2 vs 22.7  (classifier.6)
  //   dX  N=64  F=4096  O=512     1.10 vs 0.85
  //   dX  N=64  F=800   O=500     0.17 vs 0.16 (models/lenet.yaml, fc1)
  // and none slower. In the layers, `poseidon time` alternating the two,
  // backward ms: mlp_2048's fc1 7.1-7.4 -> 6.0-6.5 and fc2 8.3-8.5 ->
  // 7.9-8.5; VGG19-22K's classifier.0, .3 and .6 76.6-76.9, 13.8-14.2 and
  // 67.6-67.8 -> 65.2-67.7, 10.8-11.1 and 55.0-55.5 (with the small-batch
  // kernel's new limit, small_batch_weight_grad.h).
  const char* backward_kernels = s.bf16 ? nullptr : kDnnlFloat32BackwardKernels;
  const bool dy_columns = dy_column_major(s);
  blas_backward_data_ = blas_backward_data(s);
  // The products that read W: in bf16 first with W in the layout they
  // prefer, kept where that is the one bf16_pack.h writes; else W row-major.
  auto weight_products = [&](Tag layout_w_t, Tag layout_w) {
    forward_ = product(matrix(n, f, read, Tag::ab), matrix(f, o, read, layout_w_t),
                       s.bias ? matrix(1, o, f32, Tag::ab) : memory::desc(), matrix(n, o, f32, Tag::ab), false, s.relu);
    if (blas_backward_data_) return;
    for (bool accumulate : {true, false})
      (accumulate ? backward_data_ : backward_data_write_) =
          product(matrix(n, o, read, dy_columns ? Tag::ba : Tag::ab), matrix(o, f, read, layout_w), memory::desc(),
                  matrix(n, f, f32, Tag::ab), accumulate, false, backward_kernels);
  };
  const PackedB forward_b{f, o}, backward_b{o, f};
  if (s.bf16 && bf16_pack_supported()) {
    weight_products(Tag::any, Tag::any);
    packed_ = dnnl_is_packed(forward_.weights.get_desc(), forward_b) &&
              dnnl_is_packed(backward_data_.weights.get_desc(), backward_b) &&
              dnnl_is_packed(backward_data_write_.weights.get_desc(), backward_b);
  }
  if (packed_) {
    w_t_packed_ = memory(forward_.weights.get_desc(), dnnl_cpu_engine());
    w_packed_ = memory(backward_data_.weights.get_desc(), dnnl_cpu_engine());
  } else {
    reference_ = false;  // these are the first products made: only their kernels count
    weight_products(Tag::ba, Tag::ab);
  }
  if (s.bf16 && s.batch <= kSmallBatchWeightGradMax && Bf16WeightGrad::supported())
    small_batch_weight_grad_ = std::make_unique<Bf16WeightGrad>(n, f, o);
  small_batch_f32_weight_grad_ = !s.bf16 && s.batch <= kSmallBatchF32WeightGradMax && f32_weight_grad_supported();
  if (!small_batch_weight_grad_ && !small_batch_f32_weight_grad_)
    backward_weights_ = product(matrix(o, n, read, dy_columns ? Tag::ab : Tag::ba), matrix(n, f, read, Tag::ab),
                                memory::desc(), matrix(o, f, f32, Tag::ab), false, false, backward_kernels);
  if (dy_columns) dy_columns_ = copy(n, o, f32, Tag::ba);
  if (s.bias) {
    backward_bias_ = product(matrix(1, n, read, Tag::ab), matrix(n, o, read, Tag::ab), memory::desc(),
                             matrix(1, o, f32, Tag::ab), false);
    ones_ = memory(matrix(1, n, read, Tag::ab), dnnl_cpu_engine());
    if (s.bf16)
      std::fill_n(static_cast<uint16_t*>(ones_.get_data_handle()), n, uint16_t{0x3f80});  // bfloat16 1.0
    else
      std::fill_n(static_cast<float*>(ones_.get_data_handle()), n, 1.f);
    backward_bias_.src.set_data_handle(ones_.get_data_handle());
  }
  if (s.bf16) {
    const memory::data_type bf16 = memory::data_type::bf16;
    x_ = copy(n, f, bf16, Tag::ab);
    dy_ = copy(n, o, bf16, Tag::ab);
  }
  scratchpad_ = memory(matrix(1, std::max<int64_t>(1, (scratchpad_bytes_ + 3) / 4), f32, Tag::ab), dnnl_cpu_engine());
  for (Product* p : {&forward_, &backward_data_, &backward_data_write_, &backward_weights_, &backward_bias_})
    if (p->prim) p->args[DNNL_ARG_SCRATCHPAD] = scratchpad_;
  for (Copy* c : {&x_, &dy_, &dy_columns_})
    if (c->make) c->args[DNNL_ARG_SCRATCHPAD] = scratchpad_;
}

DnnlFc::Product DnnlFc::product(const memory::desc& src, const memory::desc& weights, const memory::desc& bias,
                                const memory::desc& dst, bool accumulate, bool relu, const char* preferred) {
  dnnl::primitive_attr attr = dnnl_forward_attr(relu);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  const dnnl::matmul::primitive_desc pd = dnnl_matmul({src, weights, bias, dst}, attr, preferred);
  reference_ = reference_ || dnnl_is_reference(pd.impl_info_str());
  scratchpad_bytes_ = std::max(scratchpad_bytes_, pd.scratchpad_desc().get_size());
  Product p;
  p.prim = dnnl::matmul(pd);
  p.src = memory(src, dnnl_cpu_engine(), nullptr);
  p.weights = memory(pd.weights_desc(), dnnl_cpu_engine(), nullptr);
  p.dst = memory(dst, dnnl_cpu_engine(), nullptr);
  p.args = {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, p.dst}};
  if (!bias.is_zero()) {
    p.bias = memory(bias, dnnl_cpu_engine(), nullptr);
    p.args[DNNL_ARG_BIAS] = p.bias;
  }
  return p;
}

DnnlFc::Copy DnnlFc::copy(int64_t rows, int64_t cols, memory::data_type type, Tag tag) {
  Copy c;
  c.from = memory(matrix(rows, cols, memory::data_type::f32, Tag::ab), dnnl_cpu_engine(), nullptr);
  c.to = memory(matrix(rows, cols, type, tag), dnnl_cpu_engine());
  if (type == memory::data_type::bf16 && tag == Tag::ab && rows * cols <= kSerialRoundingFloats) {
    c.serial_rounding = rows * cols;
    return c;
  }
  const dnnl::reorder::primitive_desc pd(dnnl_cpu_engine(), c.from.get_desc(), dnnl_cpu_engine(), c.to.get_desc(),
                                         dnnl_user_scratchpad());
  scratchpad_bytes_ = std::max(scratchpad_bytes_, pd.scratchpad_desc().get_size());
  c.make = dnnl::reorder(pd);
  c.args = {{DNNL_ARG_FROM, c.from}, {DNNL_ARG_TO, c.to}};
  return c;
}

void* DnnlFc::make(const float* data, Copy& c) {
  if (c.serial_rounding > 0) {
    uint16_t* to = static_cast<uint16_t*>(c.to.get_data_handle());
    for (int64_t i = 0; i < c.serial_rounding; ++i) to[i] = to_bf16(data[i]);
    return to;
  }
  c.from.set_data_handle(const_cast<float*>(data));  // inputs are only read
  c.make.execute(stream_, c.args);
  return c.to.get_data_handle();
}

void* DnnlFc::read(FcOperand data, Copy& c) {
  if (!shape_.bf16 || data.bf16) return const_cast<void*>(data.data);  // only read
  return make(static_cast<const float*>(data.data), c);
}

void DnnlFc::forward(FcOperand x, FcOperand w, const float* b, float* y) {
  forward_.src.set_data_handle(read(x, x_));
  if (packed_) {
    pack_bf16_weights(static_cast<const uint16_t*>(w.data), shape_.num_output, shape_.features,
                      static_cast<uint16_t*>(w_t_packed_.get_data_handle()),
                      static_cast<uint16_t*>(w_packed_.get_data_handle()));
    forward_.weights.set_data_handle(w_t_packed_.get_data_handle());
  } else {
    forward_.weights.set_data_handle(const_cast<void*>(w.data));  // W^T read in place
  }
  if (shape_.bias) forward_.bias.set_data_handle(const_cast<float*>(b));
  forward_.dst.set_data_handle(y);
  forward_.prim.execute(stream_, forward_.args);
  stream_.wait();
}

void DnnlFc::backward(FcOperand x, FcOperand w, FcOperand dy, float* dx, float* dw, float* db, bool overwrite_dx) {
  // Float32 views, meaningful in float32 only (BLAS, the small-batch kernel,
  // the column-major copy).
  const float* x_floats = static_cast<const float*>(x.data);
  const float* dy_floats = static_cast<const float*>(dy.data);
  void* dy_read = read(dy, dy_);
  // What the matrix products read for dy: its copy when column-major.
  const bool weight_product = dw && backward_weights_.prim;
  void* dy_product = dy_columns_.from && (dx || weight_product) ? make(dy_floats, dy_columns_) : dy_read;
  if (dx && blas_backward_data_) {
    gemm(false, false, shape_.batch, shape_.features, shape_.num_output, 1.f, dy_floats,
         static_cast<const float*>(w.data), overwrite_dx ? 0.f : 1.f, dx);
  } else if (dx) {
    // In bf16 w's packed copy is forward's: the weights do not change in between.
    Product& data = overwrite_dx ? backward_data_write_ : backward_data_;
    data.src.set_data_handle(dy_product);
    data.weights.set_data_handle(packed_ ? w_packed_.get_data_handle() : const_cast<void*>(w.data));
    data.dst.set_data_handle(dx);
    data.prim.execute(stream_, data.args);
  }
  // In bf16 the x that forward read: the blob itself, or forward's copy.
  void* x_read = shape_.bf16 && !x.bf16 ? x_.to.get_data_handle() : const_cast<void*>(x.data);
  if (dw && small_batch_weight_grad_) {
    small_batch_weight_grad_->run(static_cast<const uint16_t*>(dy_read), static_cast<const uint16_t*>(x_read), dw);
  } else if (dw && small_batch_f32_weight_grad_) {
    f32_weight_grad(dy_floats, x_floats, shape_.batch, shape_.features, shape_.num_output, dw);
  } else if (weight_product) {
    backward_weights_.src.set_data_handle(dy_product);
    backward_weights_.weights.set_data_handle(x_read);
    backward_weights_.dst.set_data_handle(dw);
    backward_weights_.prim.execute(stream_, backward_weights_.args);
  }
  if (shape_.bias) {
    backward_bias_.weights.set_data_handle(dy_read);
    backward_bias_.dst.set_data_handle(db);
    backward_bias_.prim.execute(stream_, backward_bias_.args);
  }
  stream_.wait();
}

}  // namespace poseidon

#endif  // POSEIDON_HAVE_DNNL
