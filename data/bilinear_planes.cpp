// Separable bilinear resampling, rows first: each output row blends its two
// source rows into one float line (a loop the compiler vectorises), then
// each output pixel blends two neighbours of that line and is normalised
// into its plane.
#include "data/bilinear_planes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace poseidon {

namespace {
// A pixel's B, G, R (and one more float) in one register of four floats
// (a GCC and Clang vector type, whatever the target's vector unit).
typedef float Lanes __attribute__((vector_size(16)));

// Output index i reads source pixels `index` and index + 1, the latter with `weight`.
struct Tap {
  int64_t index;
  float weight;
};

std::vector<Tap> taps_along(const AxisMap& m, int64_t count, int64_t size) {
  const double low = std::clamp(m.low, 0.0, static_cast<double>(size - 1));
  const double high = std::clamp(m.high, low, static_cast<double>(size - 1));
  std::vector<Tap> taps(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double s = std::clamp(m.scale * static_cast<double>(i) + m.offset, low, high);
    const auto index = static_cast<int64_t>(s);  // s >= 0: the floor
    taps[static_cast<size_t>(i)] = {index, static_cast<float>(s - static_cast<double>(index))};
  }
  return taps;
}
}  // namespace

void bilinear_planes(const BgrPixels& src, const AxisMap& rows, const AxisMap& cols, int64_t out_h, int64_t out_w,
                     bool mirror, const std::array<float, 3>& gain, const std::array<float, 3>& bias, float* dst) {
  const std::vector<Tap> row_taps = taps_along(rows, out_h, src.rows);
  std::vector<Tap> col_taps = taps_along(cols, out_w, src.cols);
  if (mirror) std::reverse(col_taps.begin(), col_taps.end());
  // The columns the output reads; one more pixel at the end of the line
  // stands for the neighbour of a last column read with weight 0.
  int64_t first = src.cols, last = 0;
  for (const Tap& t : col_taps) {
    first = std::min(first, t.index);
    last = std::max(last, t.weight > 0 ? t.index + 1 : t.index);
  }
  const int64_t span = 3 * (last - first + 1);
  const uint8_t* base = src.data + 3 * first;
  std::vector<int32_t> offsets(col_taps.size());
  for (size_t x = 0; x < col_taps.size(); ++x) offsets[x] = static_cast<int32_t>(3 * (col_taps[x].index - first));
  // Four more floats: a pixel's three channels are read as four lanes.
  std::vector<float> line(static_cast<size_t>(span + 4));
  const Lanes gain_bgr = {gain[2], gain[1], gain[0], 0}, bias_bgr = {bias[2], bias[1], bias[0], 0};
  const int64_t plane = out_h * out_w;
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap& ty = row_taps[static_cast<size_t>(y)];
    const uint8_t* above = base + static_cast<size_t>(ty.index) * src.stride;
    const uint8_t* below = base + static_cast<size_t>(std::min(ty.index + 1, src.rows - 1)) * src.stride;
    const float wy = ty.weight;
    float* blend = line.data();
    for (int64_t k = 0; k < span; ++k) {
      const float a = above[k];
      blend[k] = a + wy * (static_cast<float>(below[k]) - a);
    }
    for (int c = 0; c < 3; ++c) blend[span + c] = blend[span - 3 + c];
    blend[span + 3] = 0;
    float* r = dst + y * out_w;
    float* g = r + plane;
    float* b = g + plane;
    for (int64_t x = 0; x < out_w; ++x) {
      const float* p = blend + offsets[static_cast<size_t>(x)];
      Lanes left, right;
      std::memcpy(&left, p, sizeof left);
      std::memcpy(&right, p + 3, sizeof right);
      const Lanes v = (left + col_taps[static_cast<size_t>(x)].weight * (right - left)) * gain_bgr + bias_bgr;
      b[x] = v[0];
      g[x] = v[1];
      r[x] = v[2];
    }
  }
}

}  // namespace poseidon
