// Image transforms of the image sources, applied in torchvision's order:
// resize, crop (or the Inception-style random resized crop in one step),
// horizontal mirror, then scaling to [0, 1] and mean/std normalisation.
// A JPEG may be decoded at 1/2, 1/4 or 1/8 of its size, and only where the
// crop lies: plan() says what the output needs, apply() resamples it.
// Every random choice comes from the per-example seed the loader passes
// down, so an example's pixels depend only on (seed, epoch, index), never on
// which thread decoded it.
#pragma once

#include <array>
#include <cstdint>
#include <opencv2/core.hpp>
#include <string>

#include "data/jpeg_decoder.h"
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
  // random_resized_crop (rrc_h > 0, instead of resize and crop): a window of
  // torchvision's RandomResizedCrop (area share in `rrc_scale`, aspect ratio
  // w/h log-uniform in `rrc_ratio`, ten tries, then a centre crop) resized to
  // rrc_h x rrc_w.
  int64_t rrc_h = 0, rrc_w = 0;
  std::array<double, 2> rrc_scale{0.08, 1.0};
  std::array<double, 2> rrc_ratio{3.0 / 4.0, 4.0 / 3.0};
  // JPEGs: decode at 1/2, 1/4 or 1/8 when the output still gets at least
  // one decoded pixel per output pixel, only the crop's region, and resample
  // in one pass from the decoded pixels; false: full-size decodes and
  // torchvision's arithmetic step by step.
  bool jpeg_scaling = true;
};

// The crop window and flip chosen for one example.
struct CropChoice {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool mirror = false;
};

// What one example reads of its source image and how it lands in the output.
struct ResamplePlan {
  // The source pixels (full-size coordinates; fractional for a crop of a
  // resized image) that fill the output, before the mirror.
  double top = 0, left = 0, height = 0, width = 0;
  int64_t out_h = 0, out_w = 0;
  int scale_denom = 1;  // the image may be decoded at 1/scale_denom
  bool mirror = false;
  // Exact: torchvision's arithmetic on float pixels (a fixed resize of the
  // whole image and then `crop` cut, or the random resized crop's window
  // resized). Otherwise (a JPEG with jpeg_scaling) the output is resampled
  // from the decoded part in one pass (the same arithmetic at full size).
  bool exact = true;
  bool resize_whole = false;
  CropChoice crop;
  int64_t source_h = 0, source_w = 0;
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
  // With random_resized_crop: the window in the source image.
  CropChoice choose(int64_t height, int64_t width, uint64_t seed, const std::string& name) const;

  // The plan for a source image of height x width; `may_scale`: the decoder
  // can decode at a reduced size (JPEG).
  ResamplePlan plan(int64_t height, int64_t width, uint64_t seed, const std::string& name, bool may_scale) const;
  // What the JPEG decoder must decode for `plan`.
  static JpegRequest request(const ResamplePlan& plan);
  // Writes output_shape() floats at `dst`, RGB planes in CHW order, from the
  // decoded part of the image that request(plan) asked for.
  void apply(const DecodedRegion& region, const ResamplePlan& plan, float* dst) const;

  // Transforms a whole 8-bit 3-channel BGR image (as cv::imread returns it).
  void apply(const cv::Mat& bgr, float* dst, uint64_t seed, const std::string& name) const;

 private:
  ImageTransformConfig config_;
  // Scaling to [0, 1] and the normalisation of each RGB channel: v * gain + bias.
  std::array<float, 3> gain_, bias_;
};

}  // namespace poseidon
