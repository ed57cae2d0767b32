// Adaptive average pooling on the CPU (see adaptive_avg_pool.h).
#include "layers/adaptive_avg_pool.h"

#include <algorithm>

#include "core/im2col.h"
#include "core/registry.h"

namespace poseidon {
namespace {

using Window = AdaptiveAvgPoolLayer::Window;

std::vector<Window> adaptive_windows(int64_t in, int64_t out) {
  std::vector<Window> w(out);
  for (int64_t o = 0; o < out; ++o) w[o] = {o * in / out, ((o + 1) * in + out - 1) / out};
  return w;
}

}  // namespace

AdaptiveAvgPoolLayer::AdaptiveAvgPoolLayer(const ConfigNode& c)
    : Layer(c), out_(read_hw(c, "output_size", {1, 1}, 1)) {}

std::vector<Shape> AdaptiveAvgPoolLayer::reshape(const std::vector<Shape>& in) {
  const Shape& s = in[0];
  if (s.size() != 4) fail("expects an NCHW input, got shape " + shape_str(s));
  in_shape_ = s;
  rows_ = adaptive_windows(s[2], out_[0]);
  cols_ = adaptive_windows(s[3], out_[1]);
  single_taps_.clear();
  auto one_wide = [](const Window& w) { return w.end - w.begin == 1; };
  if (std::all_of(rows_.begin(), rows_.end(), one_wide) && std::all_of(cols_.begin(), cols_.end(), one_wide))
    for (const Window& r : rows_)
      for (const Window& c : cols_) single_taps_.push_back(r.begin * s[3] + c.begin);
  return {{s[0], s[1], out_[0], out_[1]}};
}

void AdaptiveAvgPoolLayer::forward(LayerIO& io, RunContext&) {
  POSEIDON_CHECK(io.in[0]->shape() == in_shape_) << name() << ": forward before reshape";
  const float* x = io.in[0]->data();
  float* y = io.out[0]->data();
  const int64_t planes = in_shape_[0] * in_shape_[1], width = in_shape_[3];
  const int64_t in_plane = in_shape_[2] * width, out_plane = out_[0] * out_[1];
  const int64_t* taps = single_taps_.empty() ? nullptr : single_taps_.data();
#pragma omp parallel for if (planes * (in_plane + out_plane) > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const float* src = x + p * in_plane;
    float* dst = y + p * out_plane;
    if (taps) {
      for (int64_t o = 0; o < out_plane; ++o) dst[o] = src[taps[o]];
      continue;
    }
    for (int64_t oy = 0; oy < out_[0]; ++oy)
      for (int64_t ox = 0; ox < out_[1]; ++ox) {
        const Window r = rows_[oy], c = cols_[ox];
        float sum = 0.f;
        for (int64_t iy = r.begin; iy < r.end; ++iy)
          for (int64_t ix = c.begin; ix < c.end; ++ix) sum += src[iy * width + ix];
        dst[oy * out_[1] + ox] = sum / static_cast<float>((r.end - r.begin) * (c.end - c.begin));
      }
  }
}

void AdaptiveAvgPoolLayer::backward(LayerIO& io, RunContext&) {
  if (!io.in_grad[0]) return;
  const float* dy = io.out_grad[0]->data();
  float* dx = io.in_grad[0]->data();
  const int64_t planes = in_shape_[0] * in_shape_[1], width = in_shape_[3];
  const int64_t in_plane = in_shape_[2] * width, out_plane = out_[0] * out_[1];
  const int64_t* taps = single_taps_.empty() ? nullptr : single_taps_.data();
#pragma omp parallel for if (planes * (in_plane + out_plane) > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    float* dst = dx + p * in_plane;
    const float* grad = dy + p * out_plane;
    if (taps) {  // in output order, as the windows' loops add
      for (int64_t o = 0; o < out_plane; ++o) dst[taps[o]] += grad[o];
      continue;
    }
    for (int64_t oy = 0; oy < out_[0]; ++oy)
      for (int64_t ox = 0; ox < out_[1]; ++ox) {
        const Window r = rows_[oy], c = cols_[ox];
        const float g = grad[oy * out_[1] + ox] / static_cast<float>((r.end - r.begin) * (c.end - c.begin));
        for (int64_t iy = r.begin; iy < r.end; ++iy)
          for (int64_t ix = c.begin; ix < c.end; ++ix) dst[iy * width + ix] += g;
      }
  }
}

int64_t AdaptiveAvgPoolLayer::forward_flops(const std::vector<Shape>& in) const {
  const Shape& s = in[0];
  int64_t taps = 0;
  for (const Window& r : adaptive_windows(s[2], out_[0]))
    for (const Window& c : adaptive_windows(s[3], out_[1])) taps += (r.end - r.begin) * (c.end - c.begin);
  return s[0] * s[1] * taps;
}

POSEIDON_REGISTER_LAYER(AdaptiveAvgPoolLayer, "adaptive_avg_pool",
                        "average pooling to a fixed output size, PyTorch's AdaptiveAvgPool2d",
                        {{"output_size", "ints", "", "output height and width: one value or [h, w]"}});

}  // namespace poseidon
