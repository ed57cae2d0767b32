// im2col / col2im on the CPU. Each (image, channel) plane is one unit of
// OpenMP work: it owns its rows of the column buffer in im2col and its output
// plane in col2im, so threads never write the same memory.
#include "core/im2col.h"

#include <algorithm>
#include <cstring>

namespace poseidon {

namespace {
// Parallelism pays off only above this many floats moved.
constexpr int64_t kParallelWork = 1 << 15;

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Visits every kernel tap row of one channel plane: `row(i, j, tap_row)` where
// tap_row is the index of row (i, j) among this channel's kernel_h*kernel_w rows.
template <class RowFn>
void for_each_tap(const ConvGeometry& g, RowFn row) {
  for (int64_t i = 0; i < g.kernel_h; ++i)
    for (int64_t j = 0; j < g.kernel_w; ++j) row(i, j, i * g.kernel_w + j);
}
}  // namespace

OutputSpan outputs_reading_input(int64_t size, int64_t pad, int64_t stride, int64_t tap, int64_t outputs) {
  int64_t lo = std::clamp<int64_t>(ceil_div(pad - tap, stride), 0, outputs);
  int64_t hi = std::clamp<int64_t>(ceil_div(size + pad - tap, stride), lo, outputs);
  return {lo, hi};
}

void im2col(const float* images, int64_t count, const ConvGeometry& g, float* col) {
  const int64_t oh = g.out_height(), ow = g.out_width(), per_image = oh * ow;
  const int64_t ld = count * per_image;
  const int64_t taps = g.kernel_h * g.kernel_w;
#pragma omp parallel for collapse(2) if (count * g.channels * taps * per_image > kParallelWork)
  for (int64_t n = 0; n < count; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const float* plane = images + (n * g.channels + c) * g.height * g.width;
      for_each_tap(g, [&](int64_t i, int64_t j, int64_t tap_row) {
        float* dst = col + (c * taps + tap_row) * ld + n * per_image;
        const int64_t tap_x = j * g.dilation_w;
        const OutputSpan xs = outputs_reading_input(g.width, g.pad_w, g.stride_w, tap_x, ow);
        const int64_t offset_x = tap_x - g.pad_w;  // input column of output column 0
        for (int64_t oy = 0; oy < oh; ++oy, dst += ow) {
          const int64_t iy = oy * g.stride_h - g.pad_h + i * g.dilation_h;
          if (iy < 0 || iy >= g.height) {
            std::fill(dst, dst + ow, 0.f);
            continue;
          }
          const float* row = plane + iy * g.width;
          std::fill(dst, dst + xs.lo, 0.f);
          if (g.stride_w == 1) {
            if (xs.hi > xs.lo) std::memcpy(dst + xs.lo, row + xs.lo + offset_x, (xs.hi - xs.lo) * sizeof(float));
          } else {
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) dst[ox] = row[ox * g.stride_w + offset_x];
          }
          std::fill(dst + xs.hi, dst + ow, 0.f);
        }
      });
    }
  }
}

void col2im_add(const float* col, int64_t count, const ConvGeometry& g, float* images) {
  const int64_t oh = g.out_height(), ow = g.out_width(), per_image = oh * ow;
  const int64_t ld = count * per_image;
  const int64_t taps = g.kernel_h * g.kernel_w;
#pragma omp parallel for collapse(2) if (count * g.channels * taps * per_image > kParallelWork)
  for (int64_t n = 0; n < count; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      float* plane = images + (n * g.channels + c) * g.height * g.width;
      for_each_tap(g, [&](int64_t i, int64_t j, int64_t tap_row) {
        const float* src = col + (c * taps + tap_row) * ld + n * per_image;
        const int64_t tap_x = j * g.dilation_w;
        const OutputSpan xs = outputs_reading_input(g.width, g.pad_w, g.stride_w, tap_x, ow);
        const int64_t offset_x = tap_x - g.pad_w;  // input column of output column 0
        for (int64_t oy = 0; oy < oh; ++oy, src += ow) {
          const int64_t iy = oy * g.stride_h - g.pad_h + i * g.dilation_h;
          if (iy < 0 || iy >= g.height) continue;
          float* row = plane + iy * g.width;
          if (g.stride_w == 1) {
#pragma omp simd
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) row[ox + offset_x] += src[ox];
          } else {
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) row[ox * g.stride_w + offset_x] += src[ox];
          }
        }
      });
    }
  }
}

int64_t images_per_chunk(int64_t floats_per_image, int64_t images) {
  return std::clamp<int64_t>(kColumnBudget / std::max<int64_t>(floats_per_image, 1), 1, std::max<int64_t>(images, 1));
}

std::array<int64_t, 2> read_hw(const ConfigNode& config, const std::string& key, std::array<int64_t, 2> fallback,
                               int64_t minimum) {
  auto node = config.find(key);
  if (!node) return fallback;
  std::vector<int64_t> v = node->as_int_list();
  if (v.size() != 1 && v.size() != 2)
    node->fail("expected one value or [height, width] for '" + key + "', found " + std::to_string(v.size()) +
               " values");
  std::array<int64_t, 2> hw = {v[0], v.back()};
  for (int64_t x : hw)
    if (x < minimum)
      node->fail("'" + key + "' must be at least " + std::to_string(minimum) + ", found " + std::to_string(x));
  return hw;
}

}  // namespace poseidon
