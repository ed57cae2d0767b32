// Image transforms: sizes and crop choices follow torchvision (Resize's size
// rule, RandomCrop, CenterCrop's rounding); the resize is bilinear on floats
// with half-pixel centres, the rule of torch.nn.functional.interpolate with
// align_corners=False, which cv::resize INTER_LINEAR on CV_32F also follows.
#include "data/transforms.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/error.h"

namespace poseidon {

namespace {
// splitmix64: a full-avalanche step, so neighbouring seeds give unrelated draws.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string size_str(int64_t height, int64_t width) { return std::to_string(height) + "x" + std::to_string(width); }
}  // namespace

ImageTransform::ImageTransform(ImageTransformConfig config) : config_(config) {
  POSEIDON_CHECK(config_.crop_h > 0 || config_.resize_h > 0) << "an image transform needs a crop or a fixed size";
  POSEIDON_CHECK(config_.resize_shorter == 0 || config_.resize_h == 0) << "two resize rules";
}

Shape ImageTransform::output_shape() const {
  if (config_.crop_h > 0) return {3, config_.crop_h, config_.crop_w};
  return {3, config_.resize_h, config_.resize_w};
}

std::array<int64_t, 2> ImageTransform::resized_size(int64_t height, int64_t width) const {
  if (config_.resize_h > 0) return {config_.resize_h, config_.resize_w};
  if (config_.resize_shorter == 0) return {height, width};
  const int64_t s = config_.resize_shorter;
  if (width <= height) return {s * height / width, s};
  return {s, s * width / height};
}

CropChoice ImageTransform::choose(int64_t height, int64_t width, uint64_t seed, const std::string& name) const {
  CropChoice c{0, 0, height, width, false};
  uint64_t state = seed;
  if (config_.crop_h > 0) {
    if (height < config_.crop_h || width < config_.crop_w)
      throw Error(name + ": the image is " + size_str(height, width) + " after resizing, smaller than the " +
                  size_str(config_.crop_h, config_.crop_w) + " crop (set `resize` to at least the crop size)");
    c.height = config_.crop_h;
    c.width = config_.crop_w;
    if (config_.random_crop) {
      c.top = static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(height - c.height + 1));
      c.left = static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(width - c.width + 1));
    } else {
      // CenterCrop rounds half to even (Python's round); nearbyint does too.
      c.top = static_cast<int64_t>(std::nearbyint((height - c.height) / 2.0));
      c.left = static_cast<int64_t>(std::nearbyint((width - c.width) / 2.0));
    }
  }
  if (config_.mirror) c.mirror = (next_random(state) >> 63) != 0;
  return c;
}

void ImageTransform::apply(const cv::Mat& bgr, float* dst, uint64_t seed, const std::string& name) const {
  POSEIDON_CHECK(bgr.type() == CV_8UC3) << "expected an 8-bit BGR image";
  auto [height, width] = resized_size(bgr.rows, bgr.cols);
  const CropChoice c = choose(height, width, seed, name);

  // Pixels stay 0..255 through the resize; dividing afterwards is torchvision's
  // ToTensor (x / 255) up to float rounding, since the resize is linear.
  cv::Mat pixels;
  if (height != bgr.rows || width != bgr.cols) {
    cv::Mat wide;
    bgr.convertTo(wide, CV_32FC3);
    cv::resize(wide, pixels, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0, cv::INTER_LINEAR);
  } else {
    bgr.convertTo(pixels, CV_32FC3);
  }

  const int64_t plane = c.height * c.width;
  const auto& mean = config_.mean;
  const auto& std = config_.std;
  for (int64_t y = 0; y < c.height; ++y) {
    const float* row = pixels.ptr<float>(static_cast<int>(c.top + y)) + 3 * c.left;
    float* r = dst + y * c.width;
    float* g = r + plane;
    float* b = g + plane;
    for (int64_t x = 0; x < c.width; ++x) {
      const float* px = row + 3 * (c.mirror ? c.width - 1 - x : x);
      r[x] = (px[2] / 255.f - mean[0]) / std[0];
      g[x] = (px[1] / 255.f - mean[1]) / std[1];
      b[x] = (px[0] / 255.f - mean[2]) / std[2];
    }
  }
}

}  // namespace poseidon
