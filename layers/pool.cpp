// Pooling on the CPU (see pool.h).
#include "layers/pool.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/registry.h"
#include "layers/pool_kernels.h"

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
  whole_plane_ = kernel_[0] == s[2] && kernel_[1] == s[3] && pad_[0] == 0 && pad_[1] == 0;
  column_spans_.clear();
  for (int64_t j = 0; j < kernel_[1]; ++j)
    column_spans_.push_back(outputs_reading_input(s[3], pad_[1], stride_[1], j, out_w_));
  return {{s[0], s[1], out_h_, out_w_}};
}

// Planes go to threads a run at a time, in runs of about 64 KB of input (at
// least 16 planes, a multiple of 16 so that small planes go side by side in
// the kernels), so that tiny planes (Inception's 3x3 and 1x1) do not pay a
// call each.
template <class Kernel>
void PoolLayer::for_plane_runs(Kernel kernel) const {
  const int64_t planes = in_shape_[0] * in_shape_[1], in_plane = in_shape_[2] * in_shape_[3];
  const int64_t run = std::max<int64_t>(16, 16384 / in_plane / 16 * 16), runs = (planes + run - 1) / run;
#pragma omp parallel for schedule(static) if (planes * in_plane > 32768)
  for (int64_t r = 0; r < runs; ++r) kernel(r * run, std::min(planes, (r + 1) * run));
}

namespace {

// A run of planes of a bfloat16 tensor as float32: the thread's buffer
// `slot` (0: the input side, 1: the output side), holding `n` floats.
float* run_buffer(int slot, int64_t n) {
  thread_local std::vector<float> buffers[2];
  buffers[slot].resize(n);
  return buffers[slot].data();
}

}  // namespace

void PoolLayer::forward(LayerIO& io, RunContext&) {
  POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
  const bool bf16 = io.in[0]->dtype() == DType::bf16;
  const float* x = bf16 ? nullptr : io.in[0]->data();
  float* y = bf16 ? nullptr : io.out[0]->data();
  const int64_t planes = in_shape_[0] * in_shape_[1];
  const int64_t in_plane = in_shape_[2] * in_shape_[3], out_plane = out_h_ * out_w_;
  // Sized here, not in reshape, so that the GPU layer, which keeps its own, holds no host copy.
  if (max_) argmax_.resize(planes * out_plane);
  const PoolGeometry g = geometry();
  for_plane_runs([&](int64_t begin, int64_t end) {
    const float* src;
    float* dst;
    if (bf16) {
      float* widened = run_buffer(0, (end - begin) * in_plane);
      widen_bf16_serially(io.in[0]->bf16_data() + begin * in_plane, widened, (end - begin) * in_plane);
      src = widened;
      dst = run_buffer(1, (end - begin) * out_plane);
    } else {
      src = x + begin * in_plane;
      dst = y + begin * out_plane;
    }
    if (max_)
      max_planes(g, src, dst, argmax_.data() + begin * out_plane, end - begin);
    else if (whole_plane_)
      avg_whole_planes(src, in_plane, row_divisors_[0] * col_divisors_[0], dst, end - begin);
    else
      avg_planes(g, src, dst, end - begin);
    if (bf16) round_into_bf16_serially(dst, io.out[0]->bf16_data() + begin * out_plane, (end - begin) * out_plane);
  });
}

void PoolLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const bool bf16 = io.in_grad[0]->dtype() == DType::bf16;
  const float* dy = bf16 ? nullptr : io.out_grad[0]->data();
  float* dx = bf16 ? nullptr : io.in_grad[0]->data();
  const int64_t in_plane = in_shape_[2] * in_shape_[3], out_plane = out_h_ * out_w_;
  const PoolGeometry g = geometry();
  const bool overwrite = io.overwrites_input_grad(0);
  for_plane_runs([&](int64_t begin, int64_t end) {
    const int64_t in_run = (end - begin) * in_plane, out_run = (end - begin) * out_plane;
    uint16_t* dx_bf16 = bf16 ? io.in_grad[0]->bf16_data() + begin * in_plane : nullptr;
    float* dst = bf16 ? nullptr : dx + begin * in_plane;
    const float* grad = bf16 ? nullptr : dy + begin * out_plane;
    if (bf16) {
      float* widened = run_buffer(1, out_run);
      widen_bf16_serially(io.out_grad[0]->bf16_data() + begin * out_plane, widened, out_run);
      grad = widened;
      dst = run_buffer(0, in_run);
      // The windows' shares add up in float32, then join dx with one rounding.
      if (!overwrite) widen_bf16_serially(dx_bf16, dst, in_run);
    }
    // The kernels add each window's share: a gradient holding nothing starts
    // from zero, run by run while it stays in cache.
    if (overwrite) std::fill_n(dst, in_run, 0.f);
    if (max_)
      max_planes_grad(argmax_.data() + begin * out_plane, grad, out_plane, in_plane, dst, end - begin);
    else if (whole_plane_)
      avg_whole_planes_grad(grad, in_plane, 1.f / row_divisors_[0], col_scales_[0], dst, end - begin);
    else
      avg_planes_grad(g, grad, dst, end - begin);
    if (bf16) round_into_bf16_serially(dst, dx_bf16, in_run);
  });
}

PoolGeometry PoolLayer::geometry() const {
  return {in_shape_[2],
          in_shape_[3],
          out_h_,
          out_w_,
          kernel_,
          stride_,
          pad_,
          column_spans_.data(),
          row_divisors_.data(),
          col_divisors_.data(),
          col_scales_.data()};
}

int64_t PoolLayer::forward_flops(const std::vector<Shape>& in) const {
  const Shape& s = in[0];
  if (global_) return shape_numel(s);
  return s[0] * s[1] * kernel_[0] * kernel_[1] * pooled_size(s[2], kernel_[0], stride_[0], pad_[0], ceil_mode_) *
         pooled_size(s[3], kernel_[1], stride_[1], pad_[1], ceil_mode_);
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
