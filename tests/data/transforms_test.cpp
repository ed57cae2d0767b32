// Image transforms on in-memory images: the resize's size rule and bilinear
// values (against a direct implementation of torch's interpolate rule),
// centre and random crops, the mirror, and mean/std normalisation.
#include "data/transforms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

namespace poseidon {
namespace {

ImageTransformConfig crop_config(int64_t h, int64_t w) {
  ImageTransformConfig c;
  c.crop_h = h;
  c.crop_w = w;
  return c;
}

// An image whose red channel at (y, x) is `value(y, x)`, green and blue zero.
template <class F>
cv::Mat red_image(int rows, int cols, F value) {
  cv::Mat m(rows, cols, CV_8UC3, cv::Scalar(0, 0, 0));
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x) m.at<cv::Vec3b>(y, x)[2] = static_cast<uint8_t>(value(y, x));
  return m;
}

std::vector<float> run(const ImageTransform& t, const cv::Mat& image, uint64_t seed) {
  std::vector<float> out(shape_numel(t.output_shape()));
  t.apply(image, out.data(), seed, "test image");
  return out;
}

// torch.nn.functional.interpolate(mode="bilinear", align_corners=False) of one
// channel, written out from its definition.
std::vector<double> torch_bilinear(const std::vector<double>& src, int h, int w, int oh, int ow) {
  auto source_index = [](double scale, int dst, int size) {
    double s = std::max(0.0, scale * (dst + 0.5) - 0.5);
    int i0 = static_cast<int>(s);
    int i1 = i0 + (i0 < size - 1 ? 1 : 0);
    return std::tuple<int, int, double>(i0, i1, s - i0);
  };
  std::vector<double> out(oh * ow);
  for (int y = 0; y < oh; ++y) {
    auto [y0, y1, ly] = source_index(static_cast<double>(h) / oh, y, h);
    for (int x = 0; x < ow; ++x) {
      auto [x0, x1, lx] = source_index(static_cast<double>(w) / ow, x, w);
      out[y * ow + x] = (1 - ly) * ((1 - lx) * src[y0 * w + x0] + lx * src[y0 * w + x1]) +
                        ly * ((1 - lx) * src[y1 * w + x0] + lx * src[y1 * w + x1]);
    }
  }
  return out;
}

TEST(ImageTransform, ResizeKeepsAspectAsTorchvision) {
  ImageTransformConfig c = crop_config(10, 10);
  c.resize_shorter = 224;
  ImageTransform t(c);
  // torchvision: the shorter side becomes 224, the longer int(224 * long / short).
  EXPECT_EQ(t.resized_size(375, 500), (std::array<int64_t, 2>{224, 298}));
  EXPECT_EQ(t.resized_size(500, 375), (std::array<int64_t, 2>{298, 224}));
  EXPECT_EQ(t.resized_size(53, 37), (std::array<int64_t, 2>{320, 224}));
  EXPECT_EQ(t.resized_size(100, 100), (std::array<int64_t, 2>{224, 224}));
  c.resize_shorter = 0;
  c.resize_h = 30;
  c.resize_w = 40;
  EXPECT_EQ(ImageTransform(c).resized_size(375, 500), (std::array<int64_t, 2>{30, 40}));
}

TEST(ImageTransform, BilinearResizeFollowsTorchInterpolate) {
  std::mt19937 rng(5);
  const int h = 37, w = 53;
  cv::Mat image(h, w, CV_8UC3);
  std::vector<double> red(h * w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      cv::Vec3b& px = image.at<cv::Vec3b>(y, x);
      for (int k = 0; k < 3; ++k) px[k] = static_cast<uint8_t>(rng() % 256);
      red[y * w + x] = px[2] / 255.0;
    }
  for (auto [oh, ow] : {std::pair{20, 31}, std::pair{80, 101}, std::pair{37, 26}}) {
    ImageTransformConfig c;
    c.resize_h = oh;
    c.resize_w = ow;
    std::vector<float> out = run(ImageTransform(c), image, 0);
    std::vector<double> want = torch_bilinear(red, h, w, oh, ow);
    for (int i = 0; i < oh * ow; ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << oh << "x" << ow << " at " << i;
  }
}

TEST(ImageTransform, SolidColourNormalisesPerChannel) {
  ImageTransformConfig c = crop_config(5, 6);
  c.resize_shorter = 9;
  c.mean = {0.485f, 0.456f, 0.406f};
  c.std = {0.229f, 0.224f, 0.225f};
  ImageTransform t(c);
  cv::Mat image(37, 53, CV_8UC3, cv::Scalar(10, 100, 200));  // B, G, R
  std::vector<float> out = run(t, image, 3);
  const double rgb[3] = {200, 100, 10};
  for (int ch = 0; ch < 3; ++ch) {
    const double want = (rgb[ch] / 255.0 - c.mean[ch]) / c.std[ch];
    for (int i = 0; i < 30; ++i) ASSERT_NEAR(out[ch * 30 + i], want, 1e-5 * std::abs(want)) << "channel " << ch;
  }
}

TEST(ImageTransform, CentreCropTakesTheMiddleAndRoundsHalfToEven) {
  auto value = [](int y, int x) { return y * 13 + x; };
  for (auto [rows, cols, top, left] : {std::tuple{9, 12, 3, 4}, std::tuple{10, 13, 4, 4}, std::tuple{8, 11, 2, 4}}) {
    // CenterCrop's top is round((rows - 3) / 2) with Python's round: 3.5 -> 4, 2.5 -> 2.
    ImageTransform t(crop_config(3, 4));
    std::vector<float> out = run(t, red_image(rows, cols, value), 0);
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 4; ++x)
        ASSERT_FLOAT_EQ(out[y * 4 + x], value(top + y, left + x) / 255.f) << rows << "x" << cols;
  }
}

TEST(ImageTransform, RandomCropStaysInsideAndVariesWithTheSeed) {
  ImageTransformConfig c = crop_config(8, 7);
  c.random_crop = true;
  ImageTransform t(c);
  std::set<std::pair<int64_t, int64_t>> windows;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    CropChoice w = t.choose(10, 10, seed, "x");
    EXPECT_EQ(w.height, 8);
    EXPECT_EQ(w.width, 7);
    ASSERT_GE(w.top, 0);
    ASSERT_LE(w.top + 8, 10);
    ASSERT_GE(w.left, 0);
    ASSERT_LE(w.left + 7, 10);
    windows.insert({w.top, w.left});
    EXPECT_EQ(t.choose(10, 10, seed, "x").top, w.top);  // a function of the seed
  }
  EXPECT_EQ(windows.size(), 12u);  // every one of the 3 x 4 placements occurs

  // The pixels follow the chosen window.
  auto value = [](int y, int x) { return y * 10 + x; };
  std::vector<float> out = run(t, red_image(10, 10, value), 77);
  CropChoice w = t.choose(10, 10, 77, "x");
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 7; ++x) ASSERT_FLOAT_EQ(out[y * 7 + x], value(w.top + y, w.left + x) / 255.f);
}

TEST(ImageTransform, MirrorFlipsHalfTheExamples) {
  ImageTransformConfig c = crop_config(4, 6);
  c.mirror = true;
  ImageTransform t(c);
  auto value = [](int y, int x) { return 20 * x + y; };  // asymmetric left to right
  cv::Mat image = red_image(4, 6, value);
  int flipped = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const bool mirror = t.choose(4, 6, seed, "x").mirror;
    flipped += mirror;
    std::vector<float> out = run(t, image, seed);
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 6; ++x)
        ASSERT_FLOAT_EQ(out[y * 6 + x], value(y, mirror ? 5 - x : x) / 255.f) << "seed " << seed;
  }
  EXPECT_GT(flipped, 60);
  EXPECT_LT(flipped, 140);
  c.mirror = false;
  for (uint64_t seed = 0; seed < 50; ++seed) EXPECT_FALSE(ImageTransform(c).choose(4, 6, seed, "x").mirror);
}

TEST(ImageTransform, OutputIsRgbPlanes) {
  ImageTransform t(crop_config(2, 2));
  cv::Mat image(2, 2, CV_8UC3, cv::Scalar(51, 102, 255));  // B, G, R
  std::vector<float> out = run(t, image, 0);
  EXPECT_EQ(t.output_shape(), (Shape{3, 2, 2}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(out[i], 1.0f);
    EXPECT_FLOAT_EQ(out[4 + i], 0.4f);
    EXPECT_FLOAT_EQ(out[8 + i], 0.2f);
  }
}

TEST(ImageTransform, ImageSmallerThanTheCropIsAnErrorNamingIt) {
  ImageTransform t(crop_config(20, 20));
  cv::Mat image(15, 30, CV_8UC3, cv::Scalar(0, 0, 0));
  try {
    run(t, image, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test image"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("15x30"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace poseidon
