// The libjpeg decoder on JPEGs written by OpenCV: a full decode is
// cv::imread's pixels bit for bit, a region decode is the same pixels'
// window, a scaled decode has the DCT's sizes, and data cut short is an
// error, not a grey image.
#include "data/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <opencv2/imgcodecs.hpp>

namespace poseidon {
namespace {

// Smooth colours with some texture, so every DCT coefficient band is used.
cv::Mat photo(int rows, int cols, int channels) {
  cv::Mat m(rows, cols, channels == 3 ? CV_8UC3 : CV_8UC1);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x)
      for (int c = 0; c < channels; ++c) {
        const double v = 128 + 60 * std::sin(x * 0.031 + c) * std::cos(y * 0.023 - c) + 25 * std::sin((x + y) * 0.4);
        m.ptr<uint8_t>(y)[x * channels + c] = cv::saturate_cast<uint8_t>(v);
      }
  return m;
}

std::vector<uint8_t> encode(const cv::Mat& image) {
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(cv::imencode(".jpg", image, bytes, {cv::IMWRITE_JPEG_QUALITY, 90}));
  return bytes;
}

DecodedRegion decode(const std::vector<uint8_t>& bytes, JpegRequest request) {
  DecodedRegion out;
  const std::string problem = decode_jpeg(
      bytes.data(), bytes.size(), [&](int64_t, int64_t) { return request; }, out);
  EXPECT_EQ(problem, "");
  return out;
}

TEST(JpegDecoder, FullDecodeIsImreadsPixels) {
  for (int channels : {3, 1}) {
    const std::vector<uint8_t> bytes = encode(photo(75, 101, channels));
    const cv::Mat want = cv::imdecode(bytes, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
    const DecodedRegion got = decode(bytes, {1, 0, 0, 75, 101});
    ASSERT_EQ(got.bgr.size(), want.size()) << channels;
    EXPECT_EQ(got.top, 0);
    EXPECT_EQ(got.left, 0);
    EXPECT_EQ(cv::norm(got.bgr, want, cv::NORM_INF), 0) << channels << " channels";
  }
}

TEST(JpegDecoder, RegionDecodeIsTheWindowOfTheFullDecode) {
  const std::vector<uint8_t> bytes = encode(photo(120, 160, 3));
  for (int d : {1, 2, 4}) {
    const DecodedRegion full = decode(bytes, {d, 0, 0, 120, 160});
    ASSERT_EQ(full.bgr.rows, (120 + d - 1) / d);
    ASSERT_EQ(full.bgr.cols, (160 + d - 1) / d);
    const DecodedRegion part = decode(bytes, {d, 50, 70, 30, 41});
    // The window asked for, one scaled pixel around it, columns widened to iMCUs.
    EXPECT_EQ(part.top, 50 / d - 1);
    EXPECT_LE(part.left, 70 / d - 1);
    EXPECT_GE(part.top + part.bgr.rows, (50 + 30 + d - 1) / d + 1);
    EXPECT_GE(part.left + part.bgr.cols, (70 + 41 + d - 1) / d + 1);
    EXPECT_LT(part.bgr.rows, full.bgr.rows);
    EXPECT_LT(part.bgr.cols, full.bgr.cols) << "the decode was not cropped at 1/" << d;
    const cv::Rect window(static_cast<int>(part.left), static_cast<int>(part.top), part.bgr.cols, part.bgr.rows);
    EXPECT_EQ(cv::norm(part.bgr, full.bgr(window), cv::NORM_INF), 0) << "at 1/" << d;
  }
}

TEST(JpegDecoder, DataCutShortIsAnErrorNotGrey) {
  std::vector<uint8_t> bytes = encode(photo(64, 64, 3));
  bytes.resize(bytes.size() / 2);
  DecodedRegion out;
  const std::string problem = decode_jpeg(
      bytes.data(), bytes.size(),
      [](int64_t h, int64_t w) {
        return JpegRequest{1, 0, 0, h, w};
      },
      out);
  EXPECT_NE(problem.find("Premature end of JPEG file"), std::string::npos) << problem;
  const std::vector<uint8_t> junk = {0xFF, 0xD8, 0xFF, 0x00, 0x12};
  EXPECT_NE(decode_jpeg(
                junk.data(), junk.size(),
                [](int64_t h, int64_t w) {
                  return JpegRequest{1, 0, 0, h, w};
                },
                out),
            "");
}

}  // namespace
}  // namespace poseidon
