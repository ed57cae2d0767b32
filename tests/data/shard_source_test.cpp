// Tar shards in WebDataset's layout: `write_shards` then the tar_shards
// source; four ranks (in one process) see every example once per epoch,
// with the shards reshuffled across ranks each epoch, and a rank needs only
// the shards its slice covers; resuming mid-epoch gives the same batches;
// shards written by Python's tarfile (ustar, GNU and PAX forms) load, ours
// read back in tarfile; a cut shard, a cut JPEG and a label out of range
// stop with the shard and member named, or are skipped and counted.
#include "data/shard_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <sstream>

#include "data/loader.h"
#include "data/shard_writer.h"

namespace poseidon {
namespace {

namespace fs = std::filesystem;

class ShardFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "poseidon-shards.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    // 24 solid-colour JPEGs: image i is red 8 * i, so a pixel names its image.
    for (int i = 0; i < 24; ++i) {
      const fs::path path = dir_ / "images" / ("class" + std::to_string(i % 3)) / (std::to_string(i) + ".jpg");
      fs::create_directories(path.parent_path());
      ASSERT_TRUE(cv::imwrite(path.string(), cv::Mat(20, 20, CV_8UC3, cv::Scalar(0, 0, 8 * i))));
    }
    std::vector<std::string> classes;
    ShardWriteOptions options;
    options.prefix = (dir_ / "shards" / "train").string();
    options.per_shard = 3;
    options.num_classes = 3;
    shards_ = write_shards(scan_image_folder((dir_ / "images").string(), classes), options);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<Source> source(const std::string& extra = "") {
    const std::string yaml =
        "data:\n  train: {source: tar_shards, shards: shards/train.json, crop: 8, "
        "shuffle_buffer: 4" +
        extra + "}\n";
    return make_source(ConfigNode::parse(yaml, (dir_ / "train.yaml").string()).child("data").child("train"),
                       dir_.string());
  }

  // The images (by colour) of one epoch of rank `rank` of `world`.
  static std::vector<int> epoch_images(const std::shared_ptr<Source>& s, int rank, int world, int64_t epoch) {
    LoaderConfig c;
    c.batch_size = 2;
    c.seed = 7;
    c.rank = rank;
    c.world_size = world;
    Loader loader(s, c);
    loader.seek({epoch, 0});
    std::vector<int> images;
    Tensor data, labels;
    for (int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
      loader.next(data, labels);
      for (int64_t i = 0; i < data.dim(0); ++i) {
        const int image = static_cast<int>(std::lround(data[i * 3 * 64] * 255.f / 8.f));
        images.push_back(image);
        EXPECT_EQ(static_cast<int>(labels[i]), image % 3) << "the label of image " << image;
      }
    }
    return images;
  }

  fs::path dir_;
  std::vector<std::string> shards_;
};

TEST_F(ShardFixture, FourRanksSeeEveryExampleOncePerEpochAndShardsMoveBetweenEpochs) {
  ASSERT_EQ(shards_.size(), 8u);
  auto s = source();
  EXPECT_EQ(s->size(), 24);
  EXPECT_EQ(s->num_classes(), 3);
  std::vector<std::set<int>> first_epoch;
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int> seen;
    for (int rank = 0; rank < 4; ++rank) {
      std::vector<int> mine = epoch_images(s, rank, 4, epoch);
      EXPECT_EQ(mine.size(), 6u);
      seen.insert(mine.begin(), mine.end());
      if (epoch == 0)
        first_epoch.emplace_back(mine.begin(), mine.end());
      else if (std::set<int>(mine.begin(), mine.end()) != first_epoch[rank])
        first_epoch[rank].clear();
    }
    for (int image = 0; image < 24; ++image)
      EXPECT_EQ(seen.count(image), 1u) << "image " << image << " epoch " << epoch;
  }
  int moved = 0;
  for (const auto& set : first_epoch) moved += set.empty();
  EXPECT_GT(moved, 0) << "no rank read other shards in epoch 1";
}

TEST_F(ShardFixture, ARankNeedsOnlyTheShardsOfItsSlice) {
  auto s = source();
  const auto& shards = dynamic_cast<const ShardSource&>(*s);
  const std::vector<int64_t> order = s->rank_order(0, 7, 1, 4, true);
  // The parts `poseidon data placement` lists hold exactly the examples of the rank's order.
  std::set<int64_t> needed, listed;
  for (const ShardPart& part : shards.rank_shards(0, 7, 1, 4, true)) {
    needed.insert(static_cast<int64_t>(part.shard));
    EXPECT_EQ(fs::path(shards.shard_file(part.shard).path).filename(), fs::path(shards_[part.shard]).filename());
    for (int64_t i = part.begin; i < part.end; ++i) listed.insert(static_cast<int64_t>(part.shard) * 3 + i);
  }
  EXPECT_EQ(listed, std::set<int64_t>(order.begin(), order.end()));
  EXPECT_EQ(listed.size(), order.size());
  EXPECT_LE(needed.size(), 3u);
  for (size_t i = 0; i < shards_.size(); ++i)
    if (!needed.count(static_cast<int64_t>(i))) fs::remove(shards_[i]);
  EXPECT_EQ(epoch_images(source(), 1, 4, 0).size(), 6u);
}

TEST_F(ShardFixture, ResumingMidEpochGivesTheSameBatches) {
  auto s = source();
  LoaderConfig c;
  c.batch_size = 2;
  c.seed = 3;
  c.rank = 2;
  c.world_size = 4;
  Loader straight(s, c);
  Tensor data, labels;
  std::vector<std::vector<float>> want;
  for (int b = 0; b < 5; ++b) {  // into the second epoch (3 batches each)
    straight.next(data, labels);
    if (b >= 2) want.emplace_back(data.data(), data.data() + data.numel());
  }
  c.workers = 3;
  Loader resumed(s, c);
  resumed.seek({0, 2});
  for (const auto& batch : want) {
    resumed.next(data, labels);
    ASSERT_EQ(std::vector<float>(data.data(), data.data() + data.numel()), batch);
  }
}

std::string python_run(const fs::path& dir, const std::string& script) {
  std::ofstream(dir / "script.py") << script;
  const std::string out = (dir / "script.out").string();
  const std::string command = "/usr/bin/python3 " + (dir / "script.py").string() + " > " + out;
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(out);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(ShardFixture, ShardsOfPythonsTarfileLoadAndOursReadInTarfile) {
  const std::string jpeg = (dir_ / "images/class1/4.jpg").string();
  python_run(dir_,
             "import io, tarfile\n"
             "jpeg = open('" +
                 jpeg +
                 "', 'rb').read()\n"
                 "for fmt, name in ((tarfile.GNU_FORMAT, 'gnu'), (tarfile.PAX_FORMAT, 'pax')):\n"
                 "    with tarfile.open('" +
                 (dir_ / "py-").string() +
                 "' + name + '.tar', 'w', format=fmt) as tar:\n"
                 "        for i, label in enumerate((2, 0)):\n"
                 "            key = 'folder/' + 'long' * 40 + str(i)\n"
                 "            for ext, data in (('.jpg', jpeg), ('.cls', str(label).encode())):\n"
                 "                info = tarfile.TarInfo(key + ext)\n"
                 "                info.size = len(data)\n"
                 "                tar.addfile(info, io.BytesIO(data))\n");
  for (const char* form : {"gnu", "pax"}) {
    const std::string yaml =
        std::string("data:\n  train: {source: tar_shards, shards: [py-") + form + ".tar], num_classes: 3, crop: 8}\n";
    auto s = make_source(ConfigNode::parse(yaml, "t.yaml").child("data").child("train"), dir_.string());
    ASSERT_EQ(s->size(), 2) << form;
    std::vector<float> x(3 * 64);
    EXPECT_EQ(s->read(0, x.data(), 0), 2) << form;
    EXPECT_EQ(std::lround(x[0] * 255.f / 8.f), 4) << form;
    EXPECT_EQ(s->read(1, x.data(), 0), 0) << form;
  }
  const std::string listing = python_run(
      dir_,
      "import tarfile\nwith tarfile.open('" + shards_[0] +
          "') as tar:\n"
          "    for m in tar.getmembers(): print(m.name, tar.extractfile(m).read()[:2].hex() if m.name.endswith('.jpg') "
          "else tar.extractfile(m).read().decode())\n");
  std::istringstream lines(listing);
  std::string name, content;
  int members = 0;
  while (lines >> name >> content) {
    ++members;
    if (name.ends_with(".jpg"))
      EXPECT_EQ(content, "ffd8") << name;
    else
      EXPECT_TRUE(name.ends_with(".cls") && content.size() == 1 && content[0] >= '0' && content[0] <= '2') << name;
  }
  EXPECT_EQ(members, 6);
}

std::string error_reading(const std::shared_ptr<Source>& s) {
  std::vector<float> x(shape_numel(s->sample_shape()));
  try {
    for (int64_t i = 0; i < s->size(); ++i) s->read(i, x.data(), 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

int64_t skipped_reading(const std::shared_ptr<Source>& s) {
  std::vector<float> x(shape_numel(s->sample_shape()));
  int64_t skipped = 0;
  for (int64_t i = 0; i < s->size(); ++i) s->read_skipping(i, x.data(), 0, skipped);
  return skipped;
}

// Rewrites member `name`'s bytes (same length) in a tar file.
void overwrite_member(const std::string& tar, const std::string& name, const std::string& bytes) {
  std::fstream f(tar, std::ios::in | std::ios::out | std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), {});
  const size_t header = all.find(name);
  ASSERT_NE(header, std::string::npos) << name;
  f.seekp(static_cast<std::streamoff>(header + 512));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST_F(ShardFixture, BadDataStopsNamingShardAndMemberOrIsSkipped) {
  // A label out of range: example 000000001 of the first shard says 7.
  overwrite_member(shards_[0], "000000001.cls", "7");
  std::string e = error_reading(source());
  EXPECT_NE(e.find("train-000000.tar: member '000000001.cls': label 7 is outside [0, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("train.yaml:2"), std::string::npos) << e;
  EXPECT_EQ(skipped_reading(source(", on_error: skip")), 1);

  // A JPEG cut short: the second shard's first image loses its end marker and more.
  std::ifstream in(shards_[1], std::ios::binary);
  std::string tar((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const size_t header = tar.find(".jpg");
  const size_t key = tar.rfind('\0', header) + 1;
  const std::string member = tar.substr(key, header + 4 - key);
  const size_t size = std::stoul(tar.substr(tar.find(member) + 124, 11), nullptr, 8);
  overwrite_member(shards_[1], member, std::string(size / 2, '\0'));  // the second half zeroed: no more data
  e = error_reading(source());
  EXPECT_NE(e.find("train-000000.tar"), std::string::npos) << "the label error comes first: " << e;
  overwrite_member(shards_[0], "000000001.cls", "1");
  e = error_reading(source());
  EXPECT_NE(e.find("train-000001.tar: member '" + member + "'"), std::string::npos) << e;
  EXPECT_EQ(skipped_reading(source(", on_error: skip")), 1);

  // A shard cut inside its last header: its last example is incomplete and goes.
  std::ofstream(shards_[1], std::ios::binary | std::ios::trunc) << tar;  // the JPEG whole again
  std::ifstream third_in(shards_[2], std::ios::binary);
  const std::string third((std::istreambuf_iterator<char>(third_in)), {});
  fs::resize_file(shards_[2], third.rfind(".cls") / 512 * 512 + 100);
  e = error_reading(source());
  EXPECT_NE(e.find("train-000002.tar: the file ends inside a header"), std::string::npos) << e;
  EXPECT_NE(e.find("the tar is cut short"), std::string::npos) << e;
  EXPECT_EQ(skipped_reading(source(", on_error: skip")), 1);
}

TEST_F(ShardFixture, BadKeysAreConfigErrors) {
  for (const char* extra : {", shuffle_buffer: 0", ", num_classes: 0", ", crop_scale: [0.5, 0.1]", ", shard: x"}) {
    try {
      source(extra);
      ADD_FAILURE() << extra << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("train.yaml:2"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace poseidon
