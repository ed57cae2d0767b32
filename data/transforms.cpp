// Image transforms: sizes and crop choices follow torchvision (Resize's size
// rule, RandomCrop, CenterCrop's rounding, RandomResizedCrop's sampling); the
// resize is bilinear on floats with half-pixel centres, the rule of
// torch.nn.functional.interpolate with align_corners=False, which cv::resize
// INTER_LINEAR on CV_32F also follows. From a JPEG's decoded region the
// same rule runs in one pass into the output planes (data/bilinear_planes.h);
// decoded at 1/d, the same source coordinates are interpolated in the
// smaller image: the DCT's downscaling averages each d x d block, close to
// the full-size pixels there but not bit for bit (docs/CONFIG.md states the
// tolerance).
#include "data/transforms.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/error.h"
#include "data/bilinear_planes.h"

namespace poseidon {

namespace {
// splitmix64: a full-avalanche step, so neighbouring seeds give unrelated draws.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform(uint64_t& state, double low, double high) {
  return low + (high - low) * static_cast<double>(next_random(state) >> 11) * 0x1.0p-53;
}

int64_t below(uint64_t& state, int64_t n) {
  return static_cast<int64_t>(next_random(state) % static_cast<uint64_t>(n));
}

// torchvision's ToTensor then Normalize: x / 255, then (x - mean) / std.
float normalised(float pixel, float mean, float std) { return (pixel / 255.f - mean) / std; }

std::string size_str(int64_t height, int64_t width) { return std::to_string(height) + "x" + std::to_string(width); }

// torchvision's RandomResizedCrop.get_params, Python's round (half to even)
// included; the draws come from `state` instead of torch's generator.
CropChoice resized_crop_window(int64_t height, int64_t width, const ImageTransformConfig& c, uint64_t& state) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_low = std::log(c.rrc_ratio[0]), log_high = std::log(c.rrc_ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * uniform(state, c.rrc_scale[0], c.rrc_scale[1]);
    const double aspect = std::exp(uniform(state, log_low, log_high));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = below(state, height - h + 1);
      return {top, below(state, width - w + 1), h, w, false};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < std::min(c.rrc_ratio[0], c.rrc_ratio[1]))
    h = static_cast<int64_t>(std::nearbyint(w / std::min(c.rrc_ratio[0], c.rrc_ratio[1])));
  else if (in_ratio > std::max(c.rrc_ratio[0], c.rrc_ratio[1]))
    w = static_cast<int64_t>(std::nearbyint(h * std::max(c.rrc_ratio[0], c.rrc_ratio[1])));
  return {(height - h) / 2, (width - w) / 2, h, w, false};
}

// The largest DCT scale that leaves at least one decoded pixel per output
// pixel in both directions.
int scale_for(double source_h, double source_w, int64_t out_h, int64_t out_w) {
  for (int d : {8, 4, 2})
    if (source_h >= static_cast<double>(d * out_h) && source_w >= static_cast<double>(d * out_w)) return d;
  return 1;
}

// Normalised RGB planes from BGR float pixels of the output's size.
void write_planes(const cv::Mat& pixels, bool mirror, const ImageTransformConfig& config, float* dst) {
  const int64_t height = pixels.rows, width = pixels.cols, plane = height * width;
  const auto& mean = config.mean;
  const auto& std = config.std;
  for (int64_t y = 0; y < height; ++y) {
    const float* row = pixels.ptr<float>(static_cast<int>(y));
    float* r = dst + y * width;
    float* g = r + plane;
    float* b = g + plane;
    for (int64_t x = 0; x < width; ++x) {
      const float* px = row + 3 * (mirror ? width - 1 - x : x);
      r[x] = normalised(px[2], mean[0], std[0]);
      g[x] = normalised(px[1], mean[1], std[1]);
      b[x] = normalised(px[0], mean[2], std[2]);
    }
  }
}
}  // namespace

ImageTransform::ImageTransform(ImageTransformConfig config) : config_(config) {
  POSEIDON_CHECK(config_.crop_h > 0 || config_.resize_h > 0 || config_.rrc_h > 0)
      << "an image transform needs a crop or a fixed size";
  POSEIDON_CHECK(config_.resize_shorter == 0 || config_.resize_h == 0) << "two resize rules";
  POSEIDON_CHECK(config_.rrc_h == 0 || (config_.resize_shorter == 0 && config_.resize_h == 0 && config_.crop_h == 0))
      << "random_resized_crop replaces resize and crop";
  for (int c = 0; c < 3; ++c) {
    gain_[c] = 1.f / (255.f * config_.std[c]);
    bias_[c] = -config_.mean[c] / config_.std[c];
  }
}

Shape ImageTransform::output_shape() const {
  if (config_.rrc_h > 0) return {3, config_.rrc_h, config_.rrc_w};
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
  if (config_.rrc_h > 0) {
    c = resized_crop_window(height, width, config_, state);
  } else if (config_.crop_h > 0) {
    if (height < config_.crop_h || width < config_.crop_w)
      throw Error(name + ": the image is " + size_str(height, width) + " after resizing, smaller than the " +
                  size_str(config_.crop_h, config_.crop_w) + " crop (set `resize` to at least the crop size)");
    c.height = config_.crop_h;
    c.width = config_.crop_w;
    if (config_.random_crop) {
      c.top = below(state, height - c.height + 1);
      c.left = below(state, width - c.width + 1);
    } else {
      // CenterCrop rounds half to even (Python's round); nearbyint does too.
      c.top = static_cast<int64_t>(std::nearbyint((height - c.height) / 2.0));
      c.left = static_cast<int64_t>(std::nearbyint((width - c.width) / 2.0));
    }
  }
  if (config_.mirror) c.mirror = (next_random(state) >> 63) != 0;
  return c;
}

ResamplePlan ImageTransform::plan(int64_t height, int64_t width, uint64_t seed, const std::string& name,
                                  bool may_scale) const {
  ResamplePlan p;
  p.source_h = height;
  p.source_w = width;
  if (config_.rrc_h > 0) {
    p.crop = choose(height, width, seed, name);
    p.top = static_cast<double>(p.crop.top);
    p.left = static_cast<double>(p.crop.left);
    p.height = static_cast<double>(p.crop.height);
    p.width = static_cast<double>(p.crop.width);
    p.out_h = config_.rrc_h;
    p.out_w = config_.rrc_w;
  } else {
    auto [rh, rw] = resized_size(height, width);
    p.crop = choose(rh, rw, seed, name);
    const double sy = static_cast<double>(height) / static_cast<double>(rh);
    const double sx = static_cast<double>(width) / static_cast<double>(rw);
    p.top = static_cast<double>(p.crop.top) * sy;
    p.left = static_cast<double>(p.crop.left) * sx;
    p.height = static_cast<double>(p.crop.height) * sy;
    p.width = static_cast<double>(p.crop.width) * sx;
    p.out_h = p.crop.height;
    p.out_w = p.crop.width;
  }
  p.mirror = p.crop.mirror;
  if (may_scale && config_.jpeg_scaling) p.scale_denom = scale_for(p.height, p.width, p.out_h, p.out_w);
  p.exact = !(may_scale && config_.jpeg_scaling);
  p.resize_whole = p.exact && config_.rrc_h == 0;
  return p;
}

JpegRequest ImageTransform::request(const ResamplePlan& p) {
  if (p.resize_whole) return {1, 0, 0, p.source_h, p.source_w};
  const auto top = static_cast<int64_t>(std::floor(p.top)), left = static_cast<int64_t>(std::floor(p.left));
  return {p.scale_denom, top, left, static_cast<int64_t>(std::ceil(p.top + p.height)) - top,
          static_cast<int64_t>(std::ceil(p.left + p.width)) - left};
}

void ImageTransform::apply(const DecodedRegion& region, const ResamplePlan& p, float* dst) const {
  POSEIDON_CHECK(region.bgr.type() == CV_8UC3) << "expected an 8-bit BGR image";
  const cv::Size out(static_cast<int>(p.out_w), static_cast<int>(p.out_h));
  if (p.resize_whole) {
    // Pixels stay 0..255 through the resize; dividing afterwards is
    // torchvision's ToTensor (x / 255) up to float rounding, since the resize
    // is linear.
    auto [height, width] = resized_size(region.bgr.rows, region.bgr.cols);
    cv::Mat pixels;
    region.bgr.convertTo(pixels, CV_32FC3);
    if (height != region.bgr.rows || width != region.bgr.cols)
      cv::resize(pixels, pixels, cv::Size(static_cast<int>(width), static_cast<int>(height)), 0, 0, cv::INTER_LINEAR);
    const CropChoice& c = p.crop;
    cv::Rect window(static_cast<int>(c.left), static_cast<int>(c.top), static_cast<int>(c.width),
                    static_cast<int>(c.height));
    write_planes(pixels(window), p.mirror, config_, dst);
  } else if (p.exact) {
    // A crop of whole source pixels, then the resize: torchvision's resized_crop.
    cv::Rect window(static_cast<int>(p.crop.left - region.left), static_cast<int>(p.crop.top - region.top),
                    static_cast<int>(p.crop.width), static_cast<int>(p.crop.height));
    cv::Mat pixels;
    region.bgr(window).convertTo(pixels, CV_32FC3);
    if (pixels.size() != out) cv::resize(pixels, pixels, out, 0, 0, cv::INTER_LINEAR);
    write_planes(pixels, p.mirror, config_, dst);
  } else {
    // Output pixel x reads source column left + (x + 0.5) * width / out_w - 0.5
    // (clamped, as torchvision clamps, to the crop's window of a random
    // resized crop or to the image after a fixed resize); decoded pixel i
    // covers source columns [i d, (i + 1) d), centred at i d + (d - 1) / 2,
    // so source column s is decoded column (s + 0.5) / d - 0.5.
    const double d = p.scale_denom;
    const bool window_only = config_.rrc_h > 0;
    auto axis = [&](double start, double length, int64_t out, int64_t source, int64_t decoded_start) {
      const double step = length / static_cast<double>(out), shift = -0.5 - static_cast<double>(decoded_start);
      const double low = window_only ? start : 0, high = window_only ? start + length - 1 : source - 1;
      return AxisMap{step / d, (start + 0.5 * step) / d + shift, (low + 0.5) / d + shift, (high + 0.5) / d + shift};
    };
    const BgrPixels pixels{region.bgr.data, region.bgr.rows, region.bgr.cols, region.bgr.step};
    bilinear_planes(pixels, axis(p.top, p.height, p.out_h, p.source_h, region.top),
                    axis(p.left, p.width, p.out_w, p.source_w, region.left), p.out_h, p.out_w, p.mirror, gain_, bias_,
                    dst);
  }
}

void ImageTransform::apply(const cv::Mat& bgr, float* dst, uint64_t seed, const std::string& name) const {
  POSEIDON_CHECK(bgr.type() == CV_8UC3) << "expected an 8-bit BGR image";
  const ResamplePlan p = plan(bgr.rows, bgr.cols, seed, name, false);
  DecodedRegion whole;
  whole.bgr = bgr;
  apply(whole, p, dst);
}

}  // namespace poseidon
