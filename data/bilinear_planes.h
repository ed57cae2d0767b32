// The last step of an image transform in one pass: bilinear resampling of
// 8-bit BGR pixels straight into normalised float RGB planes (CHW), with the
// mirror, so that no resized 8-bit image is made, rounded and read again.
// The interpolation is torch's (half-pixel centres, no antialiasing), in
// float, from the pixels as they are.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace poseidon {

// Where output index i reads along one axis: source coordinate
// scale * i + offset (in pixels of the given image, whose pixel k is centred
// at k), clamped to [low, high] and then to the image.
struct AxisMap {
  double scale = 1, offset = 0, low = 0, high = 0;
};

// 8-bit BGR pixels, `rows` x `cols`, rows `stride` bytes apart.
struct BgrPixels {
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t stride = 0;
};

// Writes 3 planes of out_h x out_w floats at `dst`: R, G, B, each value v
// (the interpolated 0..255 pixel) as v * gain[c] + bias[c]; `mirror` flips
// the output left-right.
void bilinear_planes(const BgrPixels& src, const AxisMap& rows, const AxisMap& cols, int64_t out_h, int64_t out_w,
                     bool mirror, const std::array<float, 3>& gain, const std::array<float, 3>& bias, float* dst);

}  // namespace poseidon
