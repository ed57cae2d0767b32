// Decoding dispatch: libjpeg for JPEG, OpenCV for the rest.
#include "data/image_decode.h"

#include <filesystem>
#include <fstream>
#include <new>
#include <opencv2/imgcodecs.hpp>

#include "data/jpeg_decoder.h"

namespace poseidon {

std::string decode_transformed(const ImageTransform& t, const uint8_t* data, size_t size, float* dst, uint64_t seed,
                               const std::string& name) {
  if (looks_like_jpeg(data, size)) {
    ResamplePlan plan;
    DecodedRegion region;
    std::string problem;
    try {
      problem = decode_jpeg(
          data, size,
          [&](int64_t height, int64_t width) {
            plan = t.plan(height, width, seed, name, true);
            return ImageTransform::request(plan);
          },
          region);
    } catch (const std::exception& e) {
      // Memory for the decoded region (a header may claim any size): cv::Exception or std::bad_alloc.
      if (!dynamic_cast<const cv::Exception*>(&e) && !dynamic_cast<const std::bad_alloc*>(&e)) throw;
      return "a JPEG of " + std::to_string(plan.source_h) + "x" + std::to_string(plan.source_w) +
             " pixels, too large to decode here";
    }
    if (problem.empty()) {
      t.apply(region, plan, dst);
      return "";
    }
    if (problem != kCmykJpeg) return problem;
  }
  cv::Mat image;
  try {
    // EXIF orientation is ignored, as PIL (and so torchvision) ignores it.
    const cv::Mat encoded(1, static_cast<int>(size), CV_8UC1, const_cast<uint8_t*>(data));
    if (size > 0 && size < (size_t{1} << 31))
      image = cv::imdecode(encoded, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION);
  } catch (const cv::Exception& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "too large to decode here";
  }
  if (image.empty()) return "cannot be decoded as an image (corrupt, or not JPEG, PNG or BMP)";
  t.apply(image, dst, seed, name);
  return "";
}

std::string read_whole_file(const std::string& path, std::vector<uint8_t>& bytes) {
  std::error_code unusable;
  if (!std::filesystem::is_regular_file(path, unusable)) return "image file not found";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot open the image file";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0);
  bytes.resize(static_cast<size_t>(std::max<std::streamoff>(size, 0)));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    return "cannot read the image file";
  return "";
}

}  // namespace poseidon
