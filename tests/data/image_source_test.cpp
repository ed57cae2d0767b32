// Image folder and list-file sources on small image sets written with OpenCV
// at test time (PNG, JPEG and BMP, odd sizes, grey and colour, a corrupt
// file): labels, shapes, values (also against torchvision's transforms),
// determinism of loading under a seed for any number of workers, and the
// error, skip and config-error behaviour.
#include "data/image_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "data/loader.h"

namespace poseidon {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "poseidon-images.XXXXXX").string();
    POSEIDON_CHECK(::mkdtemp(pattern.data()) != nullptr) << "mkdtemp failed";
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& rel) const { return (path_ / rel).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes `image` to `path` (format from the extension), creating folders.
void write_image(const std::string& path, const cv::Mat& image) {
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_TRUE(cv::imwrite(path, image)) << path;
}

// A smooth colour (or grey) picture, so JPEG keeps it recognisable.
cv::Mat picture(int rows, int cols, int channels, int seed) {
  cv::Mat m(rows, cols, channels == 3 ? CV_8UC3 : CV_8UC1);
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < cols; ++x)
      for (int c = 0; c < channels; ++c)
        m.ptr<uint8_t>(y)[x * channels + c] = static_cast<uint8_t>((x * (c + 1) + y * 3 + seed * 37) % 256);
  return m;
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

ConfigNode data_node(const std::string& flow_map) {
  return ConfigNode::parse("data:\n  train: " + flow_map + "\n", "test.yaml").child("data").child("train");
}

std::shared_ptr<Source> source_from(const std::string& flow_map, const std::string& base_dir) {
  return make_source(data_node(flow_map), base_dir);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<float> read_one(const Source& s, int64_t index, uint64_t seed, int64_t* label = nullptr) {
  std::vector<float> out(shape_numel(s.sample_shape()));
  int64_t l = s.read(index, out.data(), seed);
  if (label) *label = l;
  return out;
}

// Everything a loader yields in `batches` batches.
std::vector<float> drain(const std::shared_ptr<Source>& source, LoaderConfig c, int batches) {
  Loader loader(source, c);
  std::vector<float> all;
  Tensor data, labels;
  for (int b = 0; b < batches; ++b) {
    loader.next(data, labels);
    all.insert(all.end(), data.data(), data.data() + data.numel());
    all.insert(all.end(), labels.data(), labels.data() + labels.numel());
  }
  return all;
}

// Three classes whose sorted order differs from their creation order, with
// every kind of file the sources accept.
class MixedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    write_image(dir_ / "zebra/z.bmp", picture(40, 40, 3, 1));
    write_image(dir_ / "ant/a1.png", picture(37, 53, 3, 2));
    write_image(dir_ / "ant/a0.JPG", picture(375, 500, 3, 3));
    write_image(dir_ / "Mouse/sub/m2.jpeg", picture(53, 37, 1, 4));
    write_image(dir_ / "Mouse/m.png", picture(60, 45, 1, 5));
    write_text(dir_ / "zebra/notes.txt", "not an image");
  }
  TempDir dir_;
};

TEST_F(MixedFolder, LabelsFollowSortedClassNamesAndFilesAreSorted) {
  std::vector<std::string> classes;
  std::vector<ImageEntry> entries = scan_image_folder(dir_ / "", classes);
  EXPECT_EQ(classes, (std::vector<std::string>{"Mouse", "ant", "zebra"}));
  std::vector<std::pair<std::string, int64_t>> got;
  for (const auto& e : entries) got.emplace_back(fs::relative(e.path, dir_.path()).string(), e.label);
  EXPECT_EQ(
      got,
      (std::vector<std::pair<std::string, int64_t>>{
          {"Mouse/m.png", 0}, {"Mouse/sub/m2.jpeg", 0}, {"ant/a0.JPG", 1}, {"ant/a1.png", 1}, {"zebra/z.bmp", 2}}));
}

TEST_F(MixedFolder, EveryImageComesOutAsThreeChannelCropsWithItsLabel) {
  auto s = source_from("{source: image_folder, root: ., resize: 40, crop: [32, 24], crop_mode: random}",
                       dir_.path().string());
  EXPECT_EQ(s->size(), 5);
  EXPECT_EQ(s->num_classes(), 3);
  EXPECT_EQ(s->sample_shape(), (Shape{3, 32, 24}));
  const std::vector<int64_t> labels = {0, 0, 1, 1, 2};
  for (int64_t i = 0; i < 5; ++i) {
    int64_t label = -1;
    std::vector<float> x = read_one(*s, i, 11, &label);
    EXPECT_EQ(label, labels[i]);
    for (float v : x) ASSERT_TRUE(v >= 0.f && v <= 1.f) << "example " << i;
  }
  // A grey image has three equal channels.
  std::vector<float> grey = read_one(*s, 1, 3);
  const size_t plane = 32 * 24;
  for (size_t i = 0; i < plane; ++i) {
    ASSERT_EQ(grey[i], grey[plane + i]);
    ASSERT_EQ(grey[i], grey[2 * plane + i]);
  }
}

TEST(ImageSource, SolidColourFileNormalisesToTheExpectedNumbers) {
  TempDir dir;
  write_image(dir / "c/solid.png", cv::Mat(37, 53, CV_8UC3, cv::Scalar(10, 100, 200)));  // B, G, R
  write_image(dir / "c/grey.png", cv::Mat(20, 20, CV_8UC1, cv::Scalar(77)));
  auto s = source_from("{source: image_folder, root: ., crop: 16, mean: [0.5, 0.25, 0.125], std: [0.5, 0.2, 0.1]}",
                       dir.path().string());
  const double mean[3] = {0.5, 0.25, 0.125}, std[3] = {0.5, 0.2, 0.1};
  const double solid[3] = {200, 100, 10}, grey = 77;
  std::vector<float> g = read_one(*s, 0, 0), c = read_one(*s, 1, 0);
  for (int ch = 0; ch < 3; ++ch)
    for (int i = 0; i < 256; ++i) {
      ASSERT_NEAR(c[ch * 256 + i], (solid[ch] / 255 - mean[ch]) / std[ch], 1e-5) << "channel " << ch;
      ASSERT_NEAR(g[ch * 256 + i], (grey / 255 - mean[ch]) / std[ch], 1e-5) << "channel " << ch;
    }
}

class LoaderOnImages : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 10; ++i)
      write_image(dir_ / ((i % 2 ? "cat/" : "dog/") + std::to_string(i) + (i % 3 ? ".png" : ".jpg")),
                  picture(45 + i, 60 - i, i % 4 ? 3 : 1, i));
  }
  std::shared_ptr<Source> source(const std::string& extra = "") {
    return source_from(
        "{source: image_folder, root: ., resize: 40, crop: 32, crop_mode: random, mirror: true" + extra + "}",
        dir_.path().string());
  }
  TempDir dir_;
};

TEST_F(LoaderOnImages, SameSeedGivesTheSameBatchesForAnyNumberOfWorkers) {
  LoaderConfig c;
  c.batch_size = 4;
  c.seed = 7;
  c.workers = 1;
  std::vector<float> one = drain(source(), c, 7);  // crosses two epoch boundaries
  c.workers = 2;
  EXPECT_EQ(drain(source(), c, 7), one);
  c.workers = 3;
  c.prefetch = 1;
  EXPECT_EQ(drain(source(), c, 7), one);
}

TEST_F(LoaderOnImages, AnotherSeedGivesOtherCrops) {
  LoaderConfig c;
  c.batch_size = 5;
  c.shuffle = false;  // the same examples in the same order, so only the augmentation differs
  c.seed = 1;
  std::vector<float> a = drain(source(), c, 2);
  c.seed = 2;
  std::vector<float> b = drain(source(), c, 2);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
}

TEST_F(LoaderOnImages, CorruptImageIsAnErrorNamingTheFile) {
  write_text(dir_ / "cat/0_broken.jpg", "\xff\xd8 this is not a JPEG");
  auto s = source();
  const std::string message = error_of([&] { read_one(*s, 0, 0); });  // cat/0_broken.jpg sorts first
  EXPECT_NE(message.find("cat/0_broken.jpg"), std::string::npos) << message;
  EXPECT_NE(message.find("test.yaml:2"), std::string::npos) << message;
  EXPECT_NE(message.find("data.train"), std::string::npos) << message;

  LoaderConfig c;
  c.batch_size = 11;
  c.shuffle = false;
  Loader loader(s, c);
  Tensor data, labels;
  EXPECT_NE(error_of([&] { loader.next(data, labels); }).find("cat/0_broken.jpg"), std::string::npos);
}

TEST_F(LoaderOnImages, MissingImageInAListIsAnErrorNamingTheFile) {
  write_text(dir_ / "list.txt", "cat/1.png 0\ncat/gone.png 1\n");
  auto s = source_from("{source: image_list, list: list.txt, crop: 8}", dir_.path().string());
  EXPECT_NO_THROW(read_one(*s, 0, 0));
  const std::string message = error_of([&] { read_one(*s, 1, 0); });
  EXPECT_NE(message.find("cat/gone.png"), std::string::npos) << message;
  EXPECT_NE(message.find("not found"), std::string::npos) << message;
}

TEST_F(LoaderOnImages, SkippedImagesAreReplacedByTheNextAndCounted) {
  write_text(dir_ / "cat/broken.jpg", "garbage");
  write_text(dir_ / "dog/5_truncated.png", "\x89PNG garbage");
  auto skipping = source_from("{source: image_folder, root: ., crop: 32, on_error: skip}", dir_.path().string());
  ASSERT_EQ(skipping->size(), 12);

  // cat/broken.jpg (index 5, the last cat) is replaced by dog/0.jpg (index 6), label and all;
  // centre crops do not depend on the seed, so the replacement equals the image it repeats.
  int64_t broken_label = -1, next_label = -1;
  EXPECT_EQ(read_one(*skipping, 5, 5, &broken_label), read_one(*skipping, 6, 9, &next_label));
  EXPECT_EQ(broken_label, 1);
  EXPECT_EQ(next_label, 1);

  LoaderConfig c;
  c.batch_size = 4;
  c.shuffle = false;
  c.drop_last = true;
  Loader loader(skipping, c);
  Tensor data, labels;
  for (int b = 0; b < 3; ++b) {
    loader.next(data, labels);
    EXPECT_EQ(data.shape(), (Shape{4, 3, 32, 32}));
  }
  EXPECT_EQ(loader.skipped(), 2);
  for (int b = 0; b < 3; ++b) loader.next(data, labels);
  EXPECT_EQ(loader.skipped(), 4);  // counted again when met again in the next epoch
}

TEST(ImageSourceConfig, FolderProblemsAreConfigErrorsNamingTheKey) {
  TempDir dir;
  auto error_for = [&](const std::string& map) {
    try {
      source_from(map, dir.path().string());
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no config error)");
  };
  std::string e = error_for("{source: image_folder, root: nowhere, crop: 8}");
  EXPECT_NE(e.find("data.train.root"), std::string::npos) << e;
  EXPECT_NE(e.find("nowhere"), std::string::npos) << e;

  fs::create_directories(dir / "empty");
  e = error_for("{source: image_folder, root: empty, crop: 8}");
  EXPECT_NE(e.find("data.train.root"), std::string::npos) << e;
  EXPECT_NE(e.find("no class folders"), std::string::npos) << e;

  write_image(dir / "some/a/x.png", picture(10, 10, 3, 0));
  write_text(dir / "some/b/readme.txt", "no images here");
  e = error_for("{source: image_folder, root: some, crop: 8}");
  EXPECT_NE(e.find("data.train.root"), std::string::npos) << e;
  EXPECT_NE(e.find("'b'"), std::string::npos) << e;

  e = error_for("{source: image_folder, root: some, resize: 16}");
  EXPECT_NE(e.find("crop"), std::string::npos) << e;
  e = error_for("{source: image_folder, root: some, crop: [8, 8, 8]}");
  EXPECT_NE(e.find("data.train.crop"), std::string::npos) << e;
  e = error_for("{source: image_folder, root: some, crop: 8, std: [1, 0, 1]}");
  EXPECT_NE(e.find("data.train.std"), std::string::npos) << e;
  e = error_for("{source: image_folder, root: some, crop: 8, on_error: ignore}");
  EXPECT_NE(e.find("data.train.on_error"), std::string::npos) << e;
  e = error_for("{source: image_folder, root: some, crop: 8, colour: true}");
  EXPECT_NE(e.find("colour"), std::string::npos) << e;
  e = error_for("{source: image_list, list: missing.txt, crop: 8}");
  EXPECT_NE(e.find("data.train.list"), std::string::npos) << e;
}

TEST(ImageList, PathsAreRelativeToRootOrTheListsFolder) {
  TempDir dir;
  write_image(dir / "pics/one.png", picture(12, 12, 3, 1));
  write_image(dir / "pics/two words.png", picture(12, 12, 3, 2));
  write_text(dir / "pics/list.txt", "one.png 4\n\n  two words.png\t1  \n");
  write_text(dir / "lists/list.txt", "one.png 0\n");
  auto in_folder = source_from("{source: image_list, list: pics/list.txt, crop: 12}", dir.path().string());
  EXPECT_EQ(in_folder->size(), 2);
  EXPECT_EQ(in_folder->num_classes(), 5);
  int64_t label = -1;
  read_one(*in_folder, 1, 0, &label);
  EXPECT_EQ(label, 1);
  auto rooted = source_from("{source: image_list, list: lists/list.txt, root: pics, crop: 12}", dir.path().string());
  EXPECT_NO_THROW(read_one(*rooted, 0, 0, &label));
  EXPECT_EQ(label, 0);
}

TEST(ImageList, MalformedLinesAreConfigErrorsWithTheirLineNumbers) {
  TempDir dir;
  auto error_for = [&](const std::string& text) {
    write_text(dir / "list.txt", text);
    try {
      source_from("{source: image_list, list: list.txt, crop: 8}", dir.path().string());
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.where().file, dir / "list.txt");
      return std::to_string(e.where().line) + " " + e.what();
    }
    return std::string("(no config error)");
  };
  std::string e = error_for("a.png 0\n\nb.png\n");
  EXPECT_EQ(e.substr(0, 2), "3 ") << e;
  EXPECT_NE(e.find("list.txt:3"), std::string::npos) << e;
  EXPECT_NE(e.find("data.train.list"), std::string::npos) << e;
  e = error_for("a.png 0\nb.png cat\n");
  EXPECT_EQ(e.substr(0, 2), "2 ") << e;
  EXPECT_NE(e.find("'cat'"), std::string::npos) << e;
  e = error_for("a.png -1\n");
  EXPECT_EQ(e.substr(0, 2), "1 ") << e;
}

TEST(LoaderKeys, WorkersAndPrefetchAreReadAndChecked) {
  LoaderConfig c;
  read_loader_keys(data_node("{workers: 3, prefetch: 5}"), c);
  EXPECT_EQ(c.workers, 3);
  EXPECT_EQ(c.prefetch, 5);
  LoaderConfig d;
  read_loader_keys(data_node("{}"), d);
  EXPECT_EQ(d.workers, 2);
  EXPECT_EQ(d.prefetch, 2);
  EXPECT_THROW(read_loader_keys(data_node("{workers: 0}"), d), ConfigError);
  EXPECT_THROW(read_loader_keys(data_node("{prefetch: 0}"), d), ConfigError);
}

// torchvision's tensor form of the same transforms, run by Debian's python3-torchvision:
// ImageFolder labels and, image by image, the normalised pixels.
const char* const kTorchvisionScript = R"(
import sys, numpy as np, torchvision.transforms as T
from torchvision.datasets import ImageFolder
root, out = sys.argv[1], sys.argv[2]
mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
tf = T.Compose([T.ToTensor(), T.Resize(40, antialias=False), T.CenterCrop((36, 30)), T.Normalize(mean, std)])
ds = ImageFolder(root, tf)
with open(out, "wb") as f:
    for x, label in ds:
        f.write(np.float32(label).tobytes() + x.numpy().astype(np.float32).tobytes())
)";

TEST(ImageSource, AgreesWithTorchvisionTensorTransforms) {
  const std::string python = "/usr/bin/python3";
  if (std::system((python + " -c 'import torchvision' 2>/dev/null").c_str()) != 0) {
    const char* skip = std::getenv("POSEIDON_SKIP_TORCH");
    if (skip && std::string(skip) == "1") GTEST_SKIP() << "torchvision is not importable and POSEIDON_SKIP_TORCH=1";
    FAIL() << python << " cannot import torchvision; install python3-torchvision, or set POSEIDON_SKIP_TORCH=1";
  }
  TempDir dir;
  std::mt19937 rng(3);
  cv::Mat noise(60, 80, CV_8UC3);
  for (auto it = noise.begin<cv::Vec3b>(); it != noise.end<cv::Vec3b>(); ++it)
    *it = cv::Vec3b(rng() % 256, rng() % 256, rng() % 256);
  write_image(dir / "images/a/photo.jpg", picture(375, 500, 3, 1));  // JPEG: both decode with libjpeg-turbo
  write_image(dir / "images/a/noise.png", noise);
  write_image(dir / "images/b/grey.png", picture(53, 37, 1, 2));
  write_text(dir / "reference.py", kTorchvisionScript);
  const std::string command = python + " " + (dir / "reference.py") + " " + (dir / "images") + " " + (dir / "ref.bin");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  auto s = source_from(
      "{source: image_folder, root: images, resize: 40, crop: [36, 30], jpeg_scaling: false, "
      "mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}",
      dir.path().string());
  const int64_t n = shape_numel(s->sample_shape());
  std::ifstream in(dir / "ref.bin", std::ios::binary);
  std::vector<float> ref(1 + n);
  for (int64_t i = 0; i < s->size(); ++i) {
    ASSERT_TRUE(in.read(reinterpret_cast<char*>(ref.data()), ref.size() * sizeof(float))) << "reference too short";
    int64_t label = -1;
    std::vector<float> ours = read_one(*s, i, 0, &label);
    EXPECT_EQ(label, static_cast<int64_t>(ref[0])) << "example " << i;
    // Both interpolate with single-precision source coordinates, computed in a
    // different order: up to 500 * 2^-24 of a pixel, so at most about 3e-5 of a
    // neighbour's difference (<= 1), 1.4e-4 after dividing by the smallest std.
    for (int64_t k = 0; k < n; ++k) ASSERT_NEAR(ours[k], ref[1 + k], 2e-4) << "example " << i << " value " << k;
  }
}

}  // namespace
}  // namespace poseidon
