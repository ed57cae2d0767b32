// nvJPEG: the JPEG decoder a run chooses (the CPU's when the run is not on
// CUDA, when no GPU is there, or when no libnvjpeg loads, saying which and
// why), and on a GPU machine (tools/gpu_check.sh) batches decoded and
// transformed on the GPU against the CPU path's full-size decodes, with the
// GPU path's rate in img/s.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/device_memory.h"
#include "data/image_decode.h"
#include "data/nvjpeg_library.h"
#include "gpu_required.h"
#ifdef POSEIDON_HAVE_CUDA
#include "data/nvjpeg_batch.h"
#endif

namespace poseidon {
namespace {

TEST(NvjpegChoice, ARunNotOnCudaDecodesOnTheCpu) {
  const ImageDecoderChoice choice = choose_image_decoder(false, 1, NvjpegLibrary{});
  EXPECT_FALSE(choice.gpu);
  EXPECT_EQ(choice.line, "image decoding: CPU (libjpeg-turbo)");
}

TEST(NvjpegChoice, AMissingLibraryFallsBackToTheCpuNamingWhatWasTried) {
  const NvjpegLibrary lib = load_nvjpeg({"libnvjpeg_absent.so.99"});
  EXPECT_FALSE(lib.loaded());
  EXPECT_NE(lib.problem.find("libnvjpeg_absent.so.99"), std::string::npos) << lib.problem;
  const ImageDecoderChoice choice = choose_image_decoder(true, 1, lib);
  EXPECT_FALSE(choice.gpu);
  EXPECT_NE(choice.line.find("image decoding: CPU (libjpeg-turbo): nvJPEG not found (libnvjpeg_absent.so.99"),
            std::string::npos)
      << choice.line;
  EXPECT_NE(choice.line.find("nvidia-nvjpeg"), std::string::npos) << choice.line;
}

TEST(NvjpegChoice, ALibraryWithoutNvjpegsEntryPointsIsNotTaken) {
  // zlib loads but is no nvJPEG; the next name is tried, and the problem lists both.
  const NvjpegLibrary lib = load_nvjpeg({"libz.so.1", "libnvjpeg_absent.so.99"});
  EXPECT_FALSE(lib.loaded());
  EXPECT_NE(lib.problem.find("libz.so.1 lacks nvjpegGetProperty, nvjpegCreateSimple"), std::string::npos)
      << lib.problem;
  EXPECT_NE(lib.problem.find("libnvjpeg_absent.so.99"), std::string::npos) << lib.problem;
}

TEST(NvjpegChoice, NoGpuFallsBackToTheCpu) {
  const ImageDecoderChoice choice = choose_image_decoder(true, 0, load_nvjpeg());
  EXPECT_FALSE(choice.gpu);
  EXPECT_EQ(choice.line, "image decoding: CPU (libjpeg-turbo): no CUDA device for nvJPEG");
}

TEST(NvjpegChoice, AGpuAndTheLibraryChooseNvjpeg) {
  const NvjpegLibrary lib = load_nvjpeg();
  if (!lib.loaded()) GTEST_SKIP() << "no libnvjpeg here: " << lib.problem;
  const ImageDecoderChoice choice = choose_image_decoder(true, 1, lib);
  EXPECT_TRUE(choice.gpu);
  EXPECT_EQ(choice.line.rfind("image decoding: nvJPEG ", 0), 0u) << choice.line;
  EXPECT_NE(choice.line.find(lib.path), std::string::npos) << choice.line;
}

#ifdef POSEIDON_HAVE_CUDA
// Photo-like JPEGs of ImageNet's usual sizes: smooth colour fields, discs, noise.
std::vector<std::vector<uint8_t>> test_jpegs(int count) {
  const int sizes[][2] = {{375, 500}, {500, 375}, {333, 500}, {360, 480}};
  cv::RNG rng(3);
  std::vector<std::vector<uint8_t>> out;
  for (int i = 0; i < count; ++i) {
    const int h = sizes[i % 4][0], w = sizes[i % 4][1];
    cv::Mat img(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        img.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>(128 + 100 * std::sin(0.02 * x + i)),
                                            static_cast<uchar>(128 + 100 * std::cos(0.03 * y + 0.5 * i)),
                                            static_cast<uchar>((x + y + 7 * i) % 256));
    for (int d = 0; d < 8; ++d)
      cv::circle(img, {rng.uniform(0, w), rng.uniform(0, h)}, rng.uniform(10, 60),
                 cv::Scalar(rng.uniform(0, 256), rng.uniform(0, 256), rng.uniform(0, 256)), cv::FILLED);
    cv::Mat noise(h, w, CV_8UC3);
    rng.fill(noise, cv::RNG::NORMAL, 0, 4);
    img += noise;
    std::vector<uint8_t> bytes;
    cv::imencode(".jpg", img, bytes, {cv::IMWRITE_JPEG_QUALITY, 90});
    out.push_back(std::move(bytes));
  }
  return out;
}

// The stated tolerance of GPU against CPU decodes, on pixels scaled to
// [0, 1]: nvJPEG's IDCT and chroma upsampling are not libjpeg-turbo's, the
// resampling is the same arithmetic.
// Mean 0 and std 1 keep the outputs on that scale.
constexpr float kMaxDifference = 0.05f, kMeanDifference = 0.01f;

void expect_gpu_matches_cpu(ImageTransformConfig config, const char* what) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const NvjpegLibrary lib = load_nvjpeg();
  if (!lib.loaded()) {
    if (testing::gpu_required()) FAIL() << "a GPU machine without libnvjpeg: " << lib.problem;
    GTEST_SKIP() << lib.problem;
  }
  config.jpeg_scaling = false;  // full-size decodes on both sides
  const ImageTransform t(config);
  const auto jpegs = test_jpegs(16);
  const size_t numel = static_cast<size_t>(shape_numel(t.output_shape()));
  std::vector<EncodedImage> images;
  std::vector<float> cpu(jpegs.size() * numel);
  for (size_t i = 0; i < jpegs.size(); ++i) {
    images.push_back({jpegs[i].data(), jpegs[i].size(), 1000 + i, "image " + std::to_string(i)});
    ASSERT_EQ(decode_transformed(t, jpegs[i].data(), jpegs[i].size(), cpu.data() + i * numel, 1000 + i,
                                 images.back().name),
              "");
  }
  const Device gpu = Device::cuda(0);
  float* device = static_cast<float*>(device_memory::allocate(gpu, cpu.size() * sizeof(float)));
  NvjpegBatchDecoder decoder(lib);
  const std::vector<std::string> problems = decoder.decode(images, t, device);
  for (size_t i = 0; i < problems.size(); ++i) EXPECT_EQ(problems[i], "") << "image " << i;
  std::vector<float> back(cpu.size());
  device_memory::copy(back.data(), Device{}, device, gpu, back.size());
  double sum = 0, worst = 0;
  for (size_t k = 0; k < back.size(); ++k) {
    const double d = std::fabs(back[k] - cpu[k]);
    sum += d;
    worst = std::max(worst, d);
  }
  EXPECT_LE(worst, kMaxDifference) << what;
  EXPECT_LE(sum / static_cast<double>(back.size()), kMeanDifference) << what;
  // The rate of decode + transform on the GPU, for tools/gpu_check.sh's table.
  const int rounds = 8;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) decoder.decode(images, t, device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("nvJPEG %s (%s): max |GPU - CPU| %.4f, mean %.5f; decode + transform %.0f img/s\n", lib.version().c_str(),
              what, worst, sum / static_cast<double>(back.size()), rounds * images.size() / seconds);
  device_memory::release(gpu, device, cpu.size() * sizeof(float));
}

TEST(NvjpegGpu, ResizeAndCropMatchTheCpuPath) {
  ImageTransformConfig c;
  c.resize_shorter = 256;
  c.crop_h = c.crop_w = 224;
  c.random_crop = true;
  c.mirror = true;
  expect_gpu_matches_cpu(c, "resize 256, random crop 224");
}

TEST(NvjpegGpu, RandomResizedCropMatchesTheCpuPath) {
  ImageTransformConfig c;
  c.rrc_h = c.rrc_w = 224;
  c.mirror = true;
  expect_gpu_matches_cpu(c, "random resized crop 224");
}
#endif

}  // namespace
}  // namespace poseidon
