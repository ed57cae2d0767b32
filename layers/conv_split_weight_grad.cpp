// A convolution's weight gradient over parts of the batch (see
// conv_split_weight_grad.h).
#ifdef POSEIDON_HAVE_DNNL

#include "layers/conv_split_weight_grad.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "layers/dnnl_support.h"

namespace poseidon {

using dnnl::memory;

struct SplitWeightGrad::Part {
  int64_t first = 0;  // its first image
  dnnl::convolution_backward_weights primitive;
  dnnl::stream stream;
  // x and dy point into the caller's; dw and db are the caller's for the
  // first part and the part's own buffers for the others.
  memory x, dy, dw, db, scratchpad;
  std::unordered_map<int, memory> args;
};

namespace {

// `images` images of a tensor laid out as `whole`, where each of its images
// is one contiguous piece, the images outermost (NCHW, NHWC, nChw16c...);
// a zero descriptor otherwise.
memory::desc first_images(const memory::desc& whole, int64_t images) {
  dnnl_memory_desc_t d = whole.data;
  if (d.format_kind != dnnl_blocked || d.offset0 != 0 || d.extra.flags != 0) return {};
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < b.inner_nblks; ++i)
    if (b.inner_idxs[i] == 0) return {};
  if (static_cast<size_t>(b.strides[0] * d.padded_dims[0]) * dnnl_data_type_size(d.data_type) != whole.get_size())
    return {};
  d.dims[0] = d.padded_dims[0] = images;
  return memory::desc(d);
}

int64_t image_bytes(const memory::desc& whole) { return static_cast<int64_t>(whole.get_size()) / whole.dims()[0]; }

// oneDNN sizes a kernel's work for the threads it may use when its
// descriptor is made: for the part's kernels that is one.
class OneThreadWhileMade {
 public:
  OneThreadWhileMade() : threads_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThreadWhileMade() { omp_set_num_threads(threads_); }

 private:
  int threads_;
};

}  // namespace

SplitWeightGrad::~SplitWeightGrad() = default;

int SplitWeightGrad::parts() const { return static_cast<int>(parts_.size()); }

std::unique_ptr<SplitWeightGrad> SplitWeightGrad::create(
    const dnnl::convolution_backward_weights::primitive_desc& whole, const Geometry& g, int parts) {
  const memory::desc x = whole.src_desc(), dy = whole.diff_dst_desc(), dw = whole.diff_weights_desc();
  const memory::desc db = whole.diff_bias_desc();
  const int64_t batch = x.dims()[0];
  parts = static_cast<int>(std::min<int64_t>(parts, batch));
  if (parts < 2 || !first_images(x, 1) || !first_images(dy, 1)) return nullptr;
  std::unique_ptr<SplitWeightGrad> split(new SplitWeightGrad);
  split->x_image_bytes_ = image_bytes(x);
  split->dy_image_bytes_ = image_bytes(dy);
  split->dw_floats_ = static_cast<int64_t>(dw.get_size() / sizeof(float));
  split->db_floats_ = static_cast<int64_t>(db.get_size() / sizeof(float));
  const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
  const memory::desc weight_any(dw.dims(), x.data_type(), memory::format_tag::any);
  OneThreadWhileMade one_thread;
  try {
    int64_t first = 0;
    for (int p = 0; p < parts; ++p) {
      const int64_t images = batch / parts + (p < batch % parts ? 1 : 0);
      const memory::desc part_x = first_images(x, images), part_dy = first_images(dy, images);
      const dnnl::convolution_forward::primitive_desc hint(
          {dnnl::prop_kind::forward_training, direct, part_x, weight_any, db, part_dy, g.strides, g.dilates, g.pad,
           g.pad},
          dnnl_cpu_engine());
      const dnnl::convolution_backward_weights::primitive_desc pd(
          {direct, part_x, dw, db, part_dy, g.strides, g.dilates, g.pad, g.pad}, dnnl_user_scratchpad(),
          dnnl_cpu_engine(), hint);
      if (dnnl_is_reference(pd.impl_info_str())) return nullptr;
      Part part;
      part.first = first;
      part.primitive = dnnl::convolution_backward_weights(pd);
      part.stream = dnnl::stream(dnnl_cpu_engine());
      part.x = memory(part_x, dnnl_cpu_engine(), nullptr);
      part.dy = memory(part_dy, dnnl_cpu_engine(), nullptr);
      part.dw = p == 0 ? memory(dw, dnnl_cpu_engine(), nullptr) : memory(dw, dnnl_cpu_engine());
      part.scratchpad = memory(pd.scratchpad_desc(), dnnl_cpu_engine());
      part.args = {{DNNL_ARG_SRC, part.x},
                   {DNNL_ARG_DIFF_DST, part.dy},
                   {DNNL_ARG_DIFF_WEIGHTS, part.dw},
                   {DNNL_ARG_SCRATCHPAD, part.scratchpad}};
      if (split->db_floats_ > 0) {
        part.db = p == 0 ? memory(db, dnnl_cpu_engine(), nullptr) : memory(db, dnnl_cpu_engine());
        part.args[DNNL_ARG_DIFF_BIAS] = part.db;
      }
      if (p > 0) {
        split->later_dw_.push_back(static_cast<const float*>(part.dw.get_data_handle()));
        if (split->db_floats_ > 0) split->later_db_.push_back(static_cast<const float*>(part.db.get_data_handle()));
      }
      split->parts_.push_back(std::move(part));
      first += images;
    }
  } catch (const dnnl::error&) {
    return nullptr;
  }
  return split;
}

namespace {

// into[i] += the other parts' values, in the parts' order.
void add_parts(float* into, const std::vector<const float*>& others, int64_t n) {
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    float s = into[i];
    for (const float* other : others) s += other[i];
    into[i] = s;
  }
}

}  // namespace

void SplitWeightGrad::run(const void* x, const void* dy, float* dw, float* db) {
  const int count = parts();
  char* xs = static_cast<char*>(const_cast<void*>(x));  // only read
  char* dys = static_cast<char*>(const_cast<void*>(dy));
#pragma omp parallel for schedule(static, 1)
  for (int p = 0; p < count; ++p) {
    omp_set_num_threads(1);  // what the part's kernel was made for
    Part& part = parts_[p];
    part.x.set_data_handle(xs + part.first * x_image_bytes_);
    part.dy.set_data_handle(dys + part.first * dy_image_bytes_);
    if (p == 0) {
      part.dw.set_data_handle(dw);
      if (db_floats_ > 0) part.db.set_data_handle(db);
    }
    part.primitive.execute(part.stream, part.args);
    part.stream.wait();
  }
  add_parts(dw, later_dw_, dw_floats_);
  if (db_floats_ > 0) add_parts(db, later_db_, db_floats_);
}

bool spins_between_threads(const char* impl, const memory::dims& strides) {
  const bool strided = std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s > 1; });
  return strided && std::strcmp(impl, "jit_bf16:avx512_core_bf16") == 0;
}

}  // namespace poseidon

#endif  // POSEIDON_HAVE_DNNL
