// nvJPEG: the JPEG decoder a run chooses (the CPU's when the run is not on
// CUDA, when no GPU is there, or when no libnvjpeg loads, saying which and
// why); the loader's encoded examples, which the GPU feed decodes, carrying
// what the CPU path decodes; and on a GPU machine (tools/gpu_check.sh) batches decoded and
// transformed on the GPU against the CPU path's full-size decodes, with the
// GPU path's rate in img/s, and the feed's next batch kept from a step still
// reading the last.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/device_memory.h"
#include "data/image_decode.h"
#include "data/loader.h"
#include "data/nvjpeg_library.h"
#include "data/shard_writer.h"
#include "gpu_required.h"
#ifdef POSEIDON_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/cuda/context.h"
#include "data/gpu_image_feed.h"
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

// An image folder of JPEGs and one PNG, and tar shards of it.
class EncodedFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("poseidon_encoded_" + std::to_string(::getpid()));
    for (int i = 0; i < 12; ++i) {
      const auto folder = dir_ / "images" / ("c" + std::to_string(i % 3));
      std::filesystem::create_directories(folder);
      cv::Mat img(30 + i, 40 - i, CV_8UC3);
      cv::randu(img, 0, 255);
      cv::GaussianBlur(img, img, {5, 5}, 2);
      ASSERT_TRUE(cv::imwrite((folder / (std::to_string(i) + (i == 5 ? ".png" : ".jpg"))).string(), img));
    }
    std::vector<std::string> classes;
    ShardWriteOptions options;
    options.prefix = (dir_ / "shards" / "train").string();
    options.per_shard = 5;
    options.num_classes = 3;
    write_shards(scan_image_folder((dir_ / "images").string(), classes), options);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::shared_ptr<Source> source(const std::string& keys) {
    const std::string yaml = "data:\n  train: {" + keys + ", random_resized_crop: 16, mirror: true}\n";
    return make_source(ConfigNode::parse(yaml, (dir_ / "train.yaml").string()).child("data").child("train"),
                       dir_.string());
  }

  // The GPU feed's tests: the image folder's batches of 4 (full-size
  // decodes), for the plain loader (encoded false) and the one the feed
  // reads (true), with the same seed.
  LoaderConfig feed_batches(bool encoded) const {
    LoaderConfig c;
    c.batch_size = 4;
    c.seed = 9;
    c.drop_last = true;
    c.encoded = encoded;
    return c;
  }

  // Two epochs of 2 workers: the encoded loader's bytes, decoded on the CPU
  // with its seeds, give the plain loader's batches bit for bit, and its labels.
  static void expect_encoded_matches_plain(const std::shared_ptr<Source>& s) {
    ASSERT_NE(s->image_transform(), nullptr);
    LoaderConfig c;
    c.batch_size = 4;
    c.seed = 9;
    c.drop_last = true;
    Loader plain(s, c);
    c.encoded = true;
    Loader encoded(s, c);
    const int64_t sample = shape_numel(s->sample_shape());
    Tensor data, labels;
    int64_t carried = 0;
    for (int64_t b = 0; b < 2 * plain.batches_per_epoch(); ++b) {
      plain.next(data, labels);
      EncodedBatch e;
      encoded.next_encoded(e);
      ASSERT_EQ(e.count(), data.dim(0));
      std::vector<float> mine(static_cast<size_t>(sample));
      for (int64_t i = 0; i < e.count(); ++i) {
        EXPECT_EQ(e.labels[i], labels[i]) << "batch " << b << " example " << i;
        ASSERT_FALSE(e.bytes[i].empty()) << "every example here has its bytes";
        ASSERT_EQ(decode_transformed(*s->image_transform(), e.bytes[i].data(), e.bytes[i].size(), mine.data(),
                                     e.seeds[i], e.names[i]),
                  "");
        EXPECT_EQ(0, std::memcmp(mine.data(), data.data() + i * sample, mine.size() * sizeof(float)))
            << "batch " << b << " example " << i << " (" << e.names[i] << ")";
        ++carried;
      }
    }
    EXPECT_EQ(carried, 2 * plain.batches_per_epoch() * 4);
  }

  std::filesystem::path dir_;
};

TEST_F(EncodedFixture, ImageFolderExamplesCarryWhatTheCpuPathDecodes) {
  expect_encoded_matches_plain(source("source: image_folder, root: images"));
}

TEST_F(EncodedFixture, TarShardExamplesCarryWhatTheCpuPathDecodes) {
  expect_encoded_matches_plain(source("source: tar_shards, shards: shards/train.json, shuffle_buffer: 3"));
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

// libnvjpeg into `lib`; where it does not load the test is skipped, or
// fails where a GPU machine is expected to have it (the caller then returns).
void load_nvjpeg_or_skip(NvjpegLibrary& lib) {
  lib = load_nvjpeg();
  if (lib.loaded()) return;
  if (testing::gpu_required()) FAIL() << "a GPU machine without libnvjpeg: " << lib.problem;
  GTEST_SKIP() << lib.problem;
}

void expect_gpu_matches_cpu(ImageTransformConfig config, const char* what) {
  POSEIDON_SKIP_WITHOUT_GPU();
  NvjpegLibrary lib;
  load_nvjpeg_or_skip(lib);
  if (!lib.loaded()) return;
  config.jpeg_scaling = false;  // full-size decodes on both sides
  const ImageTransform t(config);
  const auto jpegs = test_jpegs(16);
  const size_t numel = static_cast<size_t>(shape_numel(t.output_shape()));
  std::vector<EncodedImage> images;
  std::vector<float> cpu(jpegs.size() * numel);
  for (size_t i = 0; i < jpegs.size(); ++i) {
    images.push_back({jpegs[i].data(), jpegs[i].size(), 1000 + i, "image " + std::to_string(i)});
    ASSERT_EQ(
        decode_transformed(t, jpegs[i].data(), jpegs[i].size(), cpu.data() + i * numel, 1000 + i, images.back().name),
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

// The training feed: the net's device input from nvJPEG, the PNG through
// the CPU path, against the plain loader's batches.
TEST_F(EncodedFixture, GpuFeedMatchesTheCpuLoader) {
  POSEIDON_SKIP_WITHOUT_GPU();
  NvjpegLibrary lib;
  load_nvjpeg_or_skip(lib);
  if (!lib.loaded()) return;
  auto s = source("source: image_folder, root: images, jpeg_scaling: false");
  Loader plain(s, feed_batches(false)), encoded(s, feed_batches(true));
  GpuImageFeed feed(lib, encoded);
  Tensor data, labels;
  Tensor device_data(Shape{4, 3, 16, 16}, Device::cuda(0)), device_labels(Shape{4}, Device::cuda(0));
  double worst = 0;
  for (int64_t b = 0; b < plain.batches_per_epoch(); ++b) {
    plain.next(data, labels);
    feed.next(device_data, device_labels);
    Tensor back(data.shape()), back_labels(labels.shape());
    back.copy_from(device_data);
    back_labels.copy_from(device_labels);
    for (int64_t k = 0; k < data.numel(); ++k)
      worst = std::max(worst, static_cast<double>(std::fabs(back[k] - data[k])));
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(back_labels[i], labels[i]);
  }
  EXPECT_LE(worst, kMaxDifference);
  EXPECT_EQ(feed.decoded_on_cpu(), 1) << "the PNG, once";
}

// Training reads each iteration late: the next batch is fed while the GPU
// may still run the step that reads the last one. Here the compute stream
// is held by a host function for a while, then copies the net's input
// aside; the feed's next batch, given meanwhile, must not reach that copy.
TEST_F(EncodedFixture, GpuFeedWaitsForTheStepStillReadingTheLastBatch) {
  POSEIDON_SKIP_WITHOUT_GPU();
  NvjpegLibrary lib;
  load_nvjpeg_or_skip(lib);
  if (!lib.loaded()) return;
  auto s = source("source: image_folder, root: images, jpeg_scaling: false");
  Loader plain(s, feed_batches(false)), encoded(s, feed_batches(true));
  ASSERT_GE(plain.batches_per_epoch(), 2);
  GpuImageFeed feed(lib, encoded);
  const Device gpu = Device::cuda(0);
  Tensor first, second, labels;
  plain.next(first, labels);
  plain.next(second, labels);
  Tensor device_data(first.shape(), gpu), device_labels(Shape{4}, gpu), aside(first.shape(), gpu);
  feed.next(device_data, device_labels);
  Tensor fed(first.shape());
  fed.copy_from(device_data);  // waits: the first batch is in place
  cudaStream_t compute = cuda::Context::get(0).compute();
  ASSERT_EQ(cudaLaunchHostFunc(
                compute, [](void*) { usleep(300 * 1000); }, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(aside.data(), device_data.data(), first.numel() * sizeof(float), cudaMemcpyDeviceToDevice,
                            compute),
            cudaSuccess);
  feed.next(device_data, device_labels);
  Tensor read_aside(first.shape()), now(first.shape());
  read_aside.copy_from(aside);
  now.copy_from(device_data);
  double aside_off = 0, now_off = 0, batches_apart = 0;
  for (int64_t k = 0; k < first.numel(); ++k) {
    aside_off = std::max(aside_off, static_cast<double>(std::fabs(read_aside[k] - fed[k])));
    now_off = std::max(now_off, static_cast<double>(std::fabs(now[k] - second[k])));
    batches_apart = std::max(batches_apart, static_cast<double>(std::fabs(first[k] - second[k])));
  }
  ASSERT_GT(batches_apart, 10 * kMaxDifference) << "the two batches must differ for the test to tell them apart";
  EXPECT_EQ(aside_off, 0.0) << "the step reading the first batch saw the second";
  EXPECT_LE(now_off, kMaxDifference);
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
