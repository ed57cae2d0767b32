// Data: IDX reading (plain and gzipped), the loader's seeded order, sharding,
// epoch boundaries, seek, the synthetic source, and the time next() waits.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "data/idx_source.h"
#include "data/loader.h"
#include "data/synthetic_source.h"

namespace poseidon {

namespace {
std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("poseidon-data-" + std::to_string(getpid()) + "-" + name)).string();
}

std::string idx_bytes(const std::vector<int32_t>& dims, const std::vector<uint8_t>& payload) {
  std::string s = {0, 0, 8, static_cast<char>(dims.size())};
  for (int32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((d >> shift) & 0xff));
  s.append(payload.begin(), payload.end());
  return s;
}

// Labels file where the label of example i is i % 256.
std::shared_ptr<IdxSource> counting_source(int n, bool gzip) {
  std::vector<uint8_t> pixels(n * 4), labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = static_cast<uint8_t>(i);
    for (int k = 0; k < 4; ++k) pixels[i * 4 + k] = static_cast<uint8_t>(i + k);
  }
  std::string img = temp_file(gzip ? "img.gz" : "img"), lbl = temp_file(gzip ? "lbl.gz" : "lbl");
  auto write = [&](const std::string& path, const std::string& bytes) {
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
  };
  write(img, idx_bytes({n, 2, 2}, pixels));
  write(lbl, idx_bytes({n}, labels));
  auto src = std::make_shared<IdxSource>(img, lbl, 1.f, 0.f, 1.f, 0);
  std::filesystem::remove(img);
  std::filesystem::remove(lbl);
  return src;
}

std::vector<int> labels_of_epoch(Loader& loader) {
  std::vector<int> out;
  Tensor data, labels;
  for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    loader.next(data, labels);
    for (int64_t i = 0; i < labels.numel(); ++i) out.push_back(static_cast<int>(labels[i]));
  }
  return out;
}
}  // namespace

TEST(Idx, ReadsPlainAndGzipped) {
  for (bool gz : {false, true}) {
    auto src = counting_source(10, gz);
    EXPECT_EQ(src->size(), 10);
    EXPECT_EQ(src->sample_shape(), (Shape{1, 2, 2}));
    std::vector<float> x(4);
    EXPECT_EQ(src->read(7, x.data(), 0), 7);
    EXPECT_EQ(x[0], 7.f);
    EXPECT_EQ(x[3], 10.f);
  }
}

TEST(Idx, FashionMnistIsThere) {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(dir + "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  IdxSource src(dir + "t10k-images-idx3-ubyte.gz", dir + "t10k-labels-idx1-ubyte.gz", 1.f / 255, 0, 1, 0);
  EXPECT_EQ(src.size(), 10000);
  EXPECT_EQ(src.num_classes(), 10);
  EXPECT_EQ(src.sample_shape(), (Shape{1, 28, 28}));
}

TEST(Loader, SeededShuffleIsAPermutationAndReproducible) {
  auto src = counting_source(50, false);
  LoaderConfig c;
  c.batch_size = 8;
  c.seed = 3;
  Loader a(src, c), b(src, c);
  auto ea = labels_of_epoch(a), eb = labels_of_epoch(b);
  EXPECT_EQ(ea, eb);
  EXPECT_EQ(ea.size(), 50u);
  EXPECT_EQ(std::set<int>(ea.begin(), ea.end()).size(), 50u);
  std::vector<int> sorted(ea);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(ea, sorted);
  EXPECT_NE(labels_of_epoch(a), ea);  // the next epoch is reshuffled
}

TEST(Loader, ShardsAreDisjointAndCoverTheEpoch) {
  auto src = counting_source(40, false);
  std::set<int> all;
  for (int rank = 0; rank < 4; ++rank) {
    LoaderConfig c;
    c.batch_size = 5;
    c.rank = rank;
    c.world_size = 4;
    Loader l(src, c);
    EXPECT_EQ(l.batches_per_epoch(), 2);
    for (int v : labels_of_epoch(l)) EXPECT_TRUE(all.insert(v).second) << v << " seen twice";
  }
  EXPECT_EQ(all.size(), 40u);
}

TEST(Loader, DropLastAndSeek) {
  auto src = counting_source(23, false);
  LoaderConfig c;
  c.batch_size = 5;
  c.drop_last = true;
  Loader l(src, c);
  EXPECT_EQ(l.batches_per_epoch(), 4);
  Tensor data, labels;
  std::vector<float> third;
  for (int b = 0; b < 3; ++b) l.next(data, labels);
  third.assign(labels.data(), labels.data() + labels.numel());
  l.next(data, labels);
  EXPECT_EQ(l.position().epoch, 1);
  EXPECT_EQ(l.position().batch, 0);
  l.seek({0, 2});
  l.next(data, labels);
  EXPECT_EQ(std::vector<float>(labels.data(), labels.data() + labels.numel()), third);
  EXPECT_EQ(data.shape(), (Shape{5, 1, 2, 2}));
}

TEST(Loader, UnshuffledKeepsFileOrderWithPartialLastBatch) {
  auto src = counting_source(7, false);
  LoaderConfig c;
  c.batch_size = 3;
  c.shuffle = false;
  Loader l(src, c);
  EXPECT_EQ(labels_of_epoch(l), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(Synthetic, DeterministicAndInRange) {
  SyntheticSource s({3, 4, 4}, 5, 100, 11);
  std::vector<float> a(48), b(48);
  int64_t la = s.read(17, a.data(), 0), lb = s.read(17, b.data(), 0);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(a, b);
  for (int i = 0; i < 100; ++i) {
    int64_t label = s.read(i, a.data(), 0);
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 5);
  }
}

}  // namespace poseidon

namespace poseidon {
namespace {
// A source whose every read takes `delay`.
class SlowSource : public Source {
 public:
  explicit SlowSource(std::chrono::milliseconds delay) : delay_(delay) {}
  int64_t size() const override { return 64; }
  Shape sample_shape() const override { return {1}; }
  int64_t num_classes() const override { return 2; }
  int64_t read(int64_t index, float* dst, uint64_t) const override {
    std::this_thread::sleep_for(delay_);
    dst[0] = static_cast<float>(index);
    return index % 2;
  }

 private:
  std::chrono::milliseconds delay_;
};

TEST(Loader, CountsTheTimeNextWaitsForData) {
  LoaderConfig c;
  c.batch_size = 4;
  c.workers = 1;
  c.prefetch = 1;
  Loader loader(std::make_shared<SlowSource>(std::chrono::milliseconds(10)), c);
  EXPECT_EQ(loader.waited_s(), 0.0);
  Tensor data, labels;
  for (int b = 0; b < 3; ++b) loader.next(data, labels);
  // One worker reads 4 examples of 10 ms per batch, and with one batch of
  // prefetch it starts batches 1 and 2 only when next() has taken the one
  // before: next() waits their whole 80 ms, and most of batch 0's 40 ms.
  EXPECT_GE(loader.waited_s(), 0.1);
}
}  // namespace
}  // namespace poseidon
