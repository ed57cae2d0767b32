// Image transforms of the image sources, applied in torchvision's order:
// resize, crop, horizontal mirror, then scaling to [0, 1] and mean/std
// normalisation. Every random choice comes from the per-example seed the
// loader passes down, so an example's pixels depend only on (seed, epoch,
// index), never on which thread decoded it.
#pragma once

#include <array>
#include <cstdint>
#include <opencv2/core.hpp>
#include <string>

#include "data/source.h"

namespace poseidon {

struct ImageTransformConfig {
  // `resize: N` scales the shorter side to N (the longer one to
  // floor(N * long / short)), as torchvision's Resize(N); `resize: [h, w]`
  // scales to exactly h x w. Both zero: no resize.
  int64_t resize_shorter = 0;
  int64_t resize_h = 0, resize_w = 0;
  int64_t crop_h = 0, crop_w = 0;            // zero: no crop
  bool random_crop = false;                  // false: the centre crop of torchvision's CenterCrop
  bool mirror = false;                       // flip left-right with probability 1/2
  std::array<float, 3> mean{0.f, 0.f, 0.f};  // per RGB channel, after scaling to [0, 1]
  std::array<float, 3> std{1.f, 1.f, 1.f};
};

// The crop window and flip chosen for one example.
struct CropChoice {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool mirror = false;
};

class ImageTransform {
 public:
  // Needs a crop or a resize to [h, w], so that every example has one shape.
  explicit ImageTransform(ImageTransformConfig config);

  Shape output_shape() const;  // [3, height, width]
  const ImageTransformConfig& config() const { return config_; }

  // Height and width of an image of `height` x `width` after the resize.
  std::array<int64_t, 2> resized_size(int64_t height, int64_t width) const;
  // The window and flip for an image of this resized size under `seed`;
  // throws Error (naming `name`) when the image is smaller than the crop.
  CropChoice choose(int64_t height, int64_t width, uint64_t seed, const std::string& name) const;

  // Transforms an 8-bit 3-channel BGR image (as cv::imread returns it) into
  // output_shape() floats at `dst`, RGB planes in CHW order.
  void apply(const cv::Mat& bgr, float* dst, uint64_t seed, const std::string& name) const;

 private:
  ImageTransformConfig config_;
};

}  // namespace poseidon
