// Pooling on the CPU (see pool.h).
#include "layers/pool.h"

#include <algorithm>
#include <limits>

#include "core/registry.h"

namespace poseidon {
namespace {

// PyTorch's pooling_output_shape (dilation 1): < 1 when the window does not fit.
int64_t pooled_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  int64_t span = in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Divisors of average pooling along one dimension, per output: the window's
// taps inside [-pad, size + pad) when padding counts, else inside [0, size).
// A 2-D window is a rectangle, so its divisor is the product of two of these.
std::vector<float> avg_divisors(int64_t size, int64_t kernel, int64_t stride, int64_t pad, int64_t outputs,
                                bool count_pad) {
  std::vector<float> d(outputs);
  for (int64_t o = 0; o < outputs; ++o) {
    const int64_t start = o * stride - pad, end = std::min(start + kernel, size + pad);
    d[o] = static_cast<float>(count_pad ? end - start : std::min(end, size) - std::max<int64_t>(start, 0));
  }
  return d;
}

}  // namespace

PoolLayer::PoolLayer(const ConfigNode& c) : Layer(c) {
  max_ = c.get_choice("mode", {"max", "avg"}, "max") == "max";
  global_ = c.get_bool("global", false);
  ceil_mode_ = c.get_bool("ceil_mode", false);
  count_include_pad_ = c.get_bool("count_include_pad", true);
  if (global_) {
    for (const char* key : {"kernel_size", "stride", "pad"})
      if (c.has(key))
        fail(std::string(key) + " cannot be combined with global: true (the window is the whole input)", key);
    return;
  }
  if (!c.has("kernel_size")) fail("kernel_size is required unless global is true", "kernel_size");
  kernel_ = read_hw(c, "kernel_size", {1, 1}, 1);
  stride_ = read_hw(c, "stride", kernel_, 1);
  pad_ = read_hw(c, "pad", {0, 0}, 0);
  for (int d = 0; d < 2; ++d)
    if (pad_[d] > kernel_[d] / 2)
      fail("pad " + std::to_string(pad_[d]) + " must be at most half of kernel_size " + std::to_string(kernel_[d]),
           "pad");
}

std::vector<Shape> PoolLayer::reshape(const std::vector<Shape>& in) {
  const Shape& s = in[0];
  if (s.size() != 4) fail("expects an NCHW input, got shape " + shape_str(s));
  if (s[2] * s[3] > std::numeric_limits<int32_t>::max())
    fail("input planes of " + std::to_string(s[2]) + "x" + std::to_string(s[3]) +
         " are too large to pool (argmax indices are 32-bit)");
  in_shape_ = s;
  if (global_) {
    kernel_ = {s[2], s[3]};
    stride_ = {1, 1};
    pad_ = {0, 0};
  }
  out_h_ = pooled_size(s[2], kernel_[0], stride_[0], pad_[0], ceil_mode_);
  out_w_ = pooled_size(s[3], kernel_[1], stride_[1], pad_[1], ceil_mode_);
  if (out_h_ < 1 || out_w_ < 1)
    fail("kernel_size " + std::to_string(kernel_[0]) + "x" + std::to_string(kernel_[1]) +
             " is larger than the padded input " + std::to_string(s[2] + 2 * pad_[0]) + "x" +
             std::to_string(s[3] + 2 * pad_[1]),
         "kernel_size");
  if (!max_) {
    row_divisors_ = avg_divisors(s[2], kernel_[0], stride_[0], pad_[0], out_h_, count_include_pad_);
    col_divisors_ = avg_divisors(s[3], kernel_[1], stride_[1], pad_[1], out_w_, count_include_pad_);
    col_scales_.resize(out_w_);
    for (int64_t ox = 0; ox < out_w_; ++ox) col_scales_[ox] = 1.f / col_divisors_[ox];
  }
  column_spans_.clear();
  for (int64_t j = 0; j < kernel_[1]; ++j)
    column_spans_.push_back(outputs_reading_input(s[3], pad_[1], stride_[1], j, out_w_));
  return {{s[0], s[1], out_h_, out_w_}};
}

void PoolLayer::forward(LayerIO& io, RunContext&) {
  POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const int64_t planes = in_shape_[0] * in_shape_[1];
  const int64_t in_plane = in_shape_[2] * in_shape_[3], out_plane = out_h_ * out_w_;
  // Sized here, not in reshape, so that the GPU layer, which keeps its own, holds no host copy.
  if (max_) argmax_.resize(planes * out_plane);
#pragma omp parallel for if (planes * in_plane > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    if (max_)
      max_plane(x + p * in_plane, y + p * out_plane, argmax_.data() + p * out_plane);
    else
      avg_plane(x + p * in_plane, y + p * out_plane);
  }
}

void PoolLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t planes = in_shape_[0] * in_shape_[1], width = in_shape_[3];
  const int64_t in_plane = in_shape_[2] * width, out_plane = out_h_ * out_w_;
#pragma omp parallel for if (planes * in_plane > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    float* dst = dx + p * in_plane;
    const float* grad = dy + p * out_plane;
    if (max_) {
      const int32_t* at = argmax_.data() + p * out_plane;
      for (int64_t o = 0; o < out_plane; ++o) dst[at[o]] += grad[o];
      continue;
    }
    for (int64_t oy = 0; oy < out_h_; ++oy) {
      const float* g = grad + oy * out_w_;
      // Reciprocals: a division per tap would cost more than the rest of the loop.
      const float row_scale = 1.f / row_divisors_[oy];
      for_each_tap_row(oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
        float* row = dst + iy * width;
        for (int64_t ox = lo; ox < hi; ++ox) row[ox * stride_[1] + offset] += g[ox] * row_scale * col_scales_[ox];
      });
    }
  }
}

int64_t PoolLayer::forward_flops(const std::vector<Shape>& in) const {
  const Shape& s = in[0];
  if (global_) return shape_numel(s);
  return s[0] * s[1] * kernel_[0] * kernel_[1] * pooled_size(s[2], kernel_[0], stride_[0], pad_[0], ceil_mode_) *
         pooled_size(s[3], kernel_[1], stride_[1], pad_[1], ceil_mode_);
}

// Calls visit(iy, offset, lo, hi) for each input row iy and kernel column of
// output row oy, in the row-major tap order PyTorch scans a window in:
// outputs ox in [lo, hi) read input column ox * stride + offset of row iy.
// Working on whole output rows keeps the inner loops free of dependencies.
template <class Fn>
void PoolLayer::for_each_tap_row(int64_t oy, Fn visit) const {
  const int64_t y0 = oy * stride_[0] - pad_[0];
  const int64_t y1 = std::min(y0 + kernel_[0], in_shape_[2]);
  for (int64_t iy = std::max<int64_t>(y0, 0); iy < y1; ++iy)
    for (int64_t j = 0; j < kernel_[1]; ++j) visit(iy, j - pad_[1], column_spans_[j].lo, column_spans_[j].hi);
}

namespace {
// One tap of a max window for outputs [lo, hi) of a row: output ox reads
// row[ox * stride], the input element at + ox * stride of the plane. The
// stride is a constant where it is 1 or 2 (Stride; 0: the runtime one), so
// that GCC vectorises the strided loads; indices stay 32-bit like argmax, so
// that the selects on them vectorise too.
template <int Stride>
void max_taps(const float* row, int32_t at, int64_t lo, int64_t hi, int64_t runtime_stride, float* best,
              int32_t* best_at) {
  const int32_t stride = Stride ? Stride : static_cast<int32_t>(runtime_stride);
  const int32_t end = static_cast<int32_t>(hi);
  for (int32_t ox = static_cast<int32_t>(lo); ox < end; ++ox) {
    const float v = row[ox * stride];
    const bool take = v > best[ox] || v != v;
    best[ox] = take ? v : best[ox];
    best_at[ox] = take ? at + ox * stride : best_at[ox];
  }
}
}  // namespace

// One plane: the max of each window and where it is. The first maximum in
// scan order wins and so does a NaN, as in PyTorch.
void PoolLayer::max_plane(const float* src, float* dst, int32_t* argmax) const {
  const int64_t width = in_shape_[3];
  for (int64_t oy = 0; oy < out_h_; ++oy) {
    float* best = dst + oy * out_w_;
    int32_t* best_at = argmax + oy * out_w_;
    const int64_t first_row = std::max<int64_t>(oy * stride_[0] - pad_[0], 0);
    for (int64_t ox = 0; ox < out_w_; ++ox) {
      best[ox] = -std::numeric_limits<float>::infinity();
      best_at[ox] = static_cast<int32_t>(first_row * width + std::max<int64_t>(ox * stride_[1] - pad_[1], 0));
    }
    for_each_tap_row(oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
      const float* row = src + iy * width + offset;
      const int32_t at = static_cast<int32_t>(iy * width + offset);
      switch (stride_[1]) {
        case 1: max_taps<1>(row, at, lo, hi, 1, best, best_at); break;
        case 2: max_taps<2>(row, at, lo, hi, 2, best, best_at); break;
        default: max_taps<0>(row, at, lo, hi, stride_[1], best, best_at);
      }
    });
  }
}

void PoolLayer::avg_plane(const float* src, float* dst) const {
  const int64_t width = in_shape_[3];
  for (int64_t oy = 0; oy < out_h_; ++oy) {
    float* sum = dst + oy * out_w_;
    std::fill(sum, sum + out_w_, 0.f);
    for_each_tap_row(oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
      const float* row = src + iy * width;
      for (int64_t ox = lo; ox < hi; ++ox) sum[ox] += row[ox * stride_[1] + offset];
    });
    for (int64_t ox = 0; ox < out_w_; ++ox) sum[ox] /= row_divisors_[oy] * col_divisors_[ox];
  }
}

namespace {

std::vector<KeyDoc> pool_keys() {
  return {
      {"mode", "string", "max", "max|avg"},
      {"kernel_size", "ints", "(required unless global)", "window height and width: one value or [h, w]"},
      {"stride", "ints", "kernel_size", "step between windows: one value or [h, w]"},
      {"pad", "ints", "0", "implicit padding on each side, at most half the kernel: one value or [h, w]"},
      {"ceil_mode", "bool", "false", "round the output size up (a last partial window)"},
      {"global", "bool", "false", "pool the whole input to 1x1; kernel_size, stride and pad are then not allowed"},
      {"count_include_pad", "bool", "true", "avg: padding counts in the divisor"},
  };
}

}  // namespace

POSEIDON_REGISTER_LAYER(PoolLayer, "pool", "2-D max or average pooling over NCHW input (PyTorch semantics)",
                        pool_keys());

}  // namespace poseidon
