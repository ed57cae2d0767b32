// The one-pass bilinear resampler against torch's interpolate rule written
// out in double (torchvision's resized_crop: a window cut from a larger
// image, then resized, up or down), with the mirror, the BGR to RGB planes
// and the per-channel gain and bias.
#include "data/bilinear_planes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace poseidon {
namespace {

struct Image {
  int64_t rows, cols;
  std::vector<uint8_t> bgr;
  int at(int64_t y, int64_t x, int c) const { return bgr[static_cast<size_t>((y * cols + x) * 3 + c)]; }
};

Image noise(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Image m{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows * cols * 3))};
  for (auto& v : m.bgr) v = static_cast<uint8_t>(rng() & 255);
  return m;
}

// torch.nn.functional.interpolate(bilinear, align_corners=False) of the
// window (top, left, h, w), channel c, at output (y, x) of oh x ow.
double torch_resized_crop(const Image& m, int64_t top, int64_t left, int64_t h, int64_t w, int64_t oh, int64_t ow,
                          int64_t y, int64_t x, int c) {
  auto source = [](int64_t size, int64_t out, int64_t i) {
    const double s = std::max(0.0, static_cast<double>(size) / out * (i + 0.5) - 0.5);
    const auto i0 = static_cast<int64_t>(s);
    return std::tuple<int64_t, int64_t, double>(i0, i0 + (i0 < size - 1 ? 1 : 0), s - i0);
  };
  auto [y0, y1, ly] = source(h, oh, y);
  auto [x0, x1, lx] = source(w, ow, x);
  auto px = [&](int64_t yy, int64_t xx) { return static_cast<double>(m.at(top + yy, left + xx, c)); };
  return (1 - ly) * ((1 - lx) * px(y0, x0) + lx * px(y0, x1)) + ly * ((1 - lx) * px(y1, x0) + lx * px(y1, x1));
}

// The AxisMap of torchvision's resized_crop for a window [start, start + length).
AxisMap window_axis(int64_t start, int64_t length, int64_t out) {
  const double step = static_cast<double>(length) / static_cast<double>(out);
  return {step, static_cast<double>(start) + 0.5 * step - 0.5, static_cast<double>(start),
          static_cast<double>(start + length - 1)};
}

TEST(BilinearPlanes, IsTorchvisionsResizedCropOfAWindowUpAndDown) {
  const Image m = noise(61, 83, 7);
  const BgrPixels src{m.bgr.data(), m.rows, m.cols, static_cast<size_t>(m.cols * 3)};
  struct Case {
    int64_t top, left, h, w, oh, ow;
  };
  // Down in both directions, up in both, and mixed; windows touching the
  // image's edges and inside it (where a neighbour outside must not be read).
  for (const Case& k : {Case{0, 0, 61, 83, 23, 31}, Case{5, 9, 17, 13, 40, 29}, Case{20, 50, 41, 33, 12, 70},
                        Case{3, 0, 7, 83, 16, 16}}) {
    for (bool mirror : {false, true}) {
      std::vector<float> out(static_cast<size_t>(3 * k.oh * k.ow));
      bilinear_planes(src, window_axis(k.top, k.h, k.oh), window_axis(k.left, k.w, k.ow), k.oh, k.ow, mirror, {1, 1, 1},
                      {0, 0, 0}, out.data());
      double worst = 0;
      for (int plane = 0; plane < 3; ++plane)
        for (int64_t y = 0; y < k.oh; ++y)
          for (int64_t x = 0; x < k.ow; ++x) {
            const int64_t from = mirror ? k.ow - 1 - x : x;
            const double want = torch_resized_crop(m, k.top, k.left, k.h, k.w, k.oh, k.ow, y, from, 2 - plane);
            worst = std::max(worst, std::abs(out[static_cast<size_t>((plane * k.oh + y) * k.ow + x)] - want));
          }
      // Float arithmetic on 0..255 values: a few units in the last place.
      EXPECT_LE(worst, 1e-3) << k.top << " " << k.left << " " << k.h << "x" << k.w << " to " << k.oh << "x" << k.ow
                             << (mirror ? " mirrored" : "");
    }
  }
}

TEST(BilinearPlanes, GainAndBiasPerRgbPlane) {
  // A solid colour stays itself at any position: only the gain and bias act.
  std::vector<uint8_t> bgr;
  for (int i = 0; i < 9 * 7; ++i) bgr.insert(bgr.end(), {10, 100, 200});
  const BgrPixels src{bgr.data(), 9, 7, 7 * 3};
  std::vector<float> out(3 * 4 * 5);
  bilinear_planes(src, window_axis(0, 9, 4), window_axis(0, 7, 5), 4, 5, true, {0.5f, 2.f, -1.f}, {1.f, -3.f, 7.f},
                  out.data());
  const float want[3] = {200 * 0.5f + 1, 100 * 2.f - 3, 10 * -1.f + 7};
  for (int plane = 0; plane < 3; ++plane)
    for (int i = 0; i < 20; ++i) ASSERT_FLOAT_EQ(out[static_cast<size_t>(plane * 20 + i)], want[plane]) << plane;
}

}  // namespace
}  // namespace poseidon
