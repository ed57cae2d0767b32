// JPEG decoding through libjpeg-turbo's libjpeg API, doing only the work an
// example needs: the DCT's own downscaling (1/2, 1/4, 1/8) when the output
// is at most that fraction of the source, and only the rows (skipped
// scanlines) and columns (jpeg_crop_scanline, widened to whole iMCUs) that a
// crop covers. The TurboJPEG API of Debian 12's libjpeg-turbo 2.1 has no
// partial decoding, hence the libjpeg API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <opencv2/core.hpp>
#include <string>

namespace poseidon {

// What to decode of a JPEG of a known size, chosen from its header.
struct JpegRequest {
  int scale_denom = 1;  // decode at 1/scale_denom (1, 2, 4 or 8)
  // The source pixels (full-size coordinates) the output reads; the decoder
  // adds one scaled pixel around them for interpolation.
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// A decoded part of the image at 1/scale_denom, 8-bit BGR (as cv::imread).
struct DecodedRegion {
  cv::Mat bgr;                // a view into `decoded`, or the image itself
  cv::Mat decoded;            // what libjpeg wrote
  int64_t top = 0, left = 0;  // its first row and column in the scaled image
  int scale_denom = 1;
};

// True when `data` starts with a JPEG's SOI marker.
bool looks_like_jpeg(const uint8_t* data, size_t size);

// decode_jpeg's answer for a CMYK or YCCK JPEG, which libjpeg-turbo cannot
// convert to BGR: the caller hands those to OpenCV.
inline constexpr const char* kCmykJpeg = "a CMYK JPEG";

// Decodes what `choose(height, width)` asks for. Returns "" on success, else
// what is wrong with the data (not a JPEG libjpeg can read, cut short, CMYK,
// which the caller leaves to another decoder). Errors thrown by `choose`
// propagate.
std::string decode_jpeg(const uint8_t* data, size_t size,
                        const std::function<JpegRequest(int64_t height, int64_t width)>& choose, DecodedRegion& out);

}  // namespace poseidon
