// The random resized crop: torchvision's sampling rule (bounds, the centre
// crop after ten failed tries), and the pixels of decode + transform against
// torchvision's resized_crop / Resize + CenterCrop on the same JPEG: to float
// rounding with jpeg_scaling off or at full size, within the stated
// tolerance when the JPEG is decoded at 1/2, 1/4 or 1/8 (docs/CONFIG.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "data/image_decode.h"

namespace poseidon {
namespace {

namespace fs = std::filesystem;

ImageTransformConfig rrc_config(int64_t size) {
  ImageTransformConfig c;
  c.rrc_h = c.rrc_w = size;
  return c;
}

TEST(RandomResizedCrop, WindowsKeepTorchvisionsScaleAndRatioBounds) {
  ImageTransform t(rrc_config(224));
  std::set<std::pair<int64_t, int64_t>> sizes;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const CropChoice c = t.choose(375, 500, seed, "x");
    ASSERT_GE(c.top, 0);
    ASSERT_GE(c.left, 0);
    ASSERT_LE(c.top + c.height, 375);
    ASSERT_LE(c.left + c.width, 500);
    // w and h are rounded from sqrt(area * ratio) and sqrt(area / ratio).
    const double share = static_cast<double>(c.height * c.width) / (375.0 * 500.0);
    const double ratio = static_cast<double>(c.width) / static_cast<double>(c.height);
    const double slack = 1.0 / static_cast<double>(std::min(c.height, c.width));
    ASSERT_GE(share, 0.08 * (1 - slack) * (1 - slack)) << seed;
    ASSERT_LE(share, 1.0) << seed;
    ASSERT_GE(ratio, 0.75 * (1 - 2 * slack)) << seed;
    ASSERT_LE(ratio, 4.0 / 3.0 * (1 + 2 * slack)) << seed;
    sizes.emplace(c.height, c.width);
  }
  EXPECT_GT(sizes.size(), 1000u) << "the windows should vary with the seed";
}

TEST(RandomResizedCrop, TenFailedTriesFallBackToTheCentreCrop) {
  ImageTransform t(rrc_config(8));
  // No window of 8% or more of a 10 x 1000 image has a ratio within [3/4, 4/3]:
  // torchvision then takes the widest allowed ratio, round(10 * 4/3) = 13, centred.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const CropChoice wide = t.choose(10, 1000, seed, "x");
    EXPECT_EQ((std::array<int64_t, 4>{wide.top, wide.left, wide.height, wide.width}),
              (std::array<int64_t, 4>{0, 493, 10, 13}));
    const CropChoice tall = t.choose(1000, 10, seed, "x");
    EXPECT_EQ((std::array<int64_t, 4>{tall.top, tall.left, tall.height, tall.width}),
              (std::array<int64_t, 4>{493, 0, 13, 10}));
  }
  ImageTransformConfig whole = rrc_config(8);
  whole.rrc_scale = {1, 1};
  whole.rrc_ratio = {1, 1};
  const CropChoice c = ImageTransform(whole).choose(100, 100, 7, "x");
  EXPECT_EQ((std::array<int64_t, 4>{c.top, c.left, c.height, c.width}), (std::array<int64_t, 4>{0, 0, 100, 100}));
}

// Jobs, one a line: "crop top left height width out_h out_w mirror" (torchvision's
// resized_crop) or "fixed resize_shorter crop_h crop_w" (Resize + CenterCrop);
// the outputs in [0, 1], float32 CHW, one after another.
const char* const kTorchvisionScript = R"(
import sys, numpy as np, torch
import torchvision.transforms.functional as F
from PIL import Image
image, jobs, out = sys.argv[1], sys.argv[2], sys.argv[3]
x = F.to_tensor(Image.open(image).convert("RGB"))
with open(jobs) as f, open(out, "wb") as o:
    for line in f:
        k = line.split()
        if k[0] == "crop":
            t, l, h, w, oh, ow, m = map(int, k[1:])
            y = F.resized_crop(x, t, l, h, w, [oh, ow], antialias=False)
            if m: y = F.hflip(y)
        else:
            s, ch, cw = map(int, k[1:])
            y = F.center_crop(F.resize(x, s, antialias=False), [ch, cw])
        o.write(y.numpy().astype(np.float32).tobytes())
)";

class AgainstTorchvision : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("/usr/bin/python3 -c 'import torchvision' 2>/dev/null") != 0) {
      const char* skip = std::getenv("POSEIDON_SKIP_TORCH");
      if (skip && std::string(skip) == "1") GTEST_SKIP() << "torchvision is not importable and POSEIDON_SKIP_TORCH=1";
      FAIL() << "/usr/bin/python3 cannot import torchvision; install python3-torchvision, or set POSEIDON_SKIP_TORCH=1";
    }
    std::string pattern = (fs::temp_directory_path() / "poseidon-rrc.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    // A photograph-like picture: smooth shading with some texture.
    cv::Mat m(375, 500, CV_8UC3);
    for (int y = 0; y < m.rows; ++y)
      for (int x = 0; x < m.cols; ++x)
        for (int c = 0; c < 3; ++c)
          m.ptr<uint8_t>(y)[3 * x + c] = cv::saturate_cast<uint8_t>(
              128 + 70 * std::sin(x * 0.021 + 2 * c) * std::cos(y * 0.017 - c) + 20 * std::sin((x - 2 * y) * 0.15 + c));
    ASSERT_TRUE(cv::imencode(".jpg", m, jpeg_, {cv::IMWRITE_JPEG_QUALITY, 92}));
    std::ofstream(dir_ / "photo.jpg", std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg_.data()), jpeg_.size());
    std::ofstream(dir_ / "reference.py") << kTorchvisionScript;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // torchvision's outputs for `jobs`, `values` floats each.
  std::vector<float> reference(const std::string& jobs, size_t values) {
    std::ofstream(dir_ / "jobs.txt") << jobs;
    const std::string command = "/usr/bin/python3 " + (dir_ / "reference.py").string() + " " +
                                (dir_ / "photo.jpg").string() + " " + (dir_ / "jobs.txt").string() + " " +
                                (dir_ / "ref.bin").string();
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    std::vector<float> ref(values);
    std::ifstream in(dir_ / "ref.bin", std::ios::binary);
    EXPECT_TRUE(in.read(reinterpret_cast<char*>(ref.data()), values * sizeof(float))) << "reference too short";
    return ref;
  }

  // Differences from torchvision per DCT scale (0: jpeg_scaling off): largest, sum, count.
  struct Differences {
    double worst = 0, sum = 0;
    int64_t count = 0;
  };

  // Runs each transform on the JPEG for seeds 0..n-1 and compares every
  // output with torchvision's (one Python run for all).
  std::map<int, Differences> compare(const std::vector<std::pair<ImageTransform, int>>& runs) {
    std::vector<float> ours;
    std::vector<std::pair<int, int64_t>> outputs;  // DCT scale and size of each output
    std::string jobs;
    for (const auto& [t, n] : runs) {
      const int64_t numel = shape_numel(t.output_shape());
      const ImageTransformConfig& c = t.config();
      for (int s = 0; s < n; ++s) {
        const ResamplePlan p = t.plan(375, 500, s, "photo.jpg", true);
        outputs.emplace_back(c.jpeg_scaling ? p.scale_denom : 0, numel);
        ours.resize(ours.size() + numel);
        EXPECT_EQ(decode_transformed(t, jpeg_.data(), jpeg_.size(), ours.data() + ours.size() - numel, s, "photo.jpg"),
                  "");
        if (c.rrc_h > 0)
          jobs += "crop " + std::to_string(p.crop.top) + " " + std::to_string(p.crop.left) + " " +
                  std::to_string(p.crop.height) + " " + std::to_string(p.crop.width) + " " + std::to_string(c.rrc_h) +
                  " " + std::to_string(c.rrc_w) + " " + std::to_string(p.mirror) + "\n";
        else
          jobs += "fixed " + std::to_string(c.resize_shorter) + " " + std::to_string(c.crop_h) + " " +
                  std::to_string(c.crop_w) + "\n";
      }
    }
    const std::vector<float> ref = reference(jobs, ours.size());
    std::map<int, Differences> by_scale;
    size_t at = 0;
    for (const auto& [d, numel] : outputs) {
      Differences& diff = by_scale[d];
      for (int64_t k = 0; k < numel; ++k, ++at) {
        const double x = std::abs(ours[at] - ref[at]);
        diff.worst = std::max(diff.worst, x);
        diff.sum += x;
      }
      diff.count += numel;
    }
    return by_scale;
  }

  fs::path dir_;
  std::vector<uint8_t> jpeg_;
};

TEST_F(AgainstTorchvision, ExactAtFullSizeWithinTheStatedToleranceScaled) {
  ImageTransformConfig full = rrc_config(56);
  full.mirror = true;
  full.jpeg_scaling = false;
  ImageTransformConfig scaled = rrc_config(80);
  scaled.mirror = true;
  ImageTransformConfig fixed;
  fixed.resize_shorter = 64;
  fixed.crop_h = fixed.crop_w = 56;
  const std::map<int, Differences> diff =
      compare({{ImageTransform(full), 16}, {ImageTransform(scaled), 40}, {ImageTransform(fixed), 1}});
  for (int d : {0, 1, 2, 4}) ASSERT_TRUE(diff.count(d)) << "no output was decoded at 1/" << d;
  for (const auto& [d, x] : diff) {
    // Without jpeg_scaling, and with it at full size (the crop's region of
    // the same decode): torchvision's arithmetic, single-precision source
    // coordinates computed in another order. Decoded at 1/2 or 1/4: the
    // tolerance of docs/CONFIG.md, in units of the [0, 1] pixel range.
    const double mean = x.sum / static_cast<double>(x.count);
    EXPECT_LE(x.worst, d <= 1 ? 5e-5 : 0.05) << "largest difference at 1/" << d;
    EXPECT_LE(mean, d <= 1 ? 5e-5 : 0.01) << "mean difference at 1/" << d;
    std::printf("%s: largest %.4f, mean %.5f\n", d == 0 ? "exact" : ("1/" + std::to_string(d)).c_str(), x.worst, mean);
  }
}

}  // namespace
}  // namespace poseidon
