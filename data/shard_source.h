// Tar shards in WebDataset's layout as a Source: each example is a group of
// members sharing a key, `KEY.jpg` (or .jpeg, .png, .bmp) and `KEY.cls` (the
// label as decimal text), shards named `name-000000.tar`. The shards' example
// counts come from a WebDataset index (`{"shardlist": [{"url", "nsamples"}]}`,
// as `poseidon data shard` writes) or from reading every shard's headers.
//
// Each epoch the shards are put in an order drawn from the seed and the
// epoch, their examples laid end to end, and rank r of W takes the r-th of W
// equal slices (the last N mod W examples of the order wait for another
// epoch): a rank opens only the shards its slice covers, so a host needs
// those, and every example is seen once per epoch across the ranks. Within
// its slice a rank reads through a shuffle buffer, as WebDataset's shuffle().
// A shard's member list is read when the shard is first needed.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "data/source.h"
#include "data/tar_reader.h"
#include "data/transforms.h"

namespace poseidon {

struct ShardFile {
  std::string path;
  int64_t examples = 0;
};

// The shards of a WebDataset index file (paths relative to its folder), and
// its `num_classes` when it has one (0 otherwise). Throws Error naming the file.
std::vector<ShardFile> read_shard_index(const std::string& index, int64_t& num_classes);
// The example count of each tar file, from its headers.
std::vector<ShardFile> count_shard_examples(const std::vector<std::string>& tars);

// The part of one shard a rank reads in an epoch: its examples [begin, end).
struct ShardPart {
  size_t shard = 0;  // position in the source's shard list
  int64_t begin = 0, end = 0;
};

class ShardSource : public Source {
 public:
  // `shuffle_buffer`: examples held by the within-rank shuffle (1: none).
  // With `skip_bad`, an example that cannot be used (cut-off shard, image
  // that does not decode, label not in [0, num_classes)) is replaced by the
  // next usable one of its shard and counted; otherwise it is an Error
  // naming the shard and member.
  ShardSource(std::vector<ShardFile> shards, int64_t num_classes, ImageTransform transform, int64_t shuffle_buffer,
              bool skip_bad, std::string origin);
  ~ShardSource() override;

  int64_t size() const override { return total_; }
  Shape sample_shape() const override { return transform_.output_shape(); }
  int64_t num_classes() const override { return num_classes_; }
  int64_t read(int64_t index, float* dst, uint64_t seed) const override;
  int64_t read_skipping(int64_t index, float* dst, uint64_t seed, int64_t& skipped) const override;
  std::vector<int64_t> rank_order(int64_t epoch, uint64_t seed, int rank, int world, bool shuffle) const override;
  const ImageTransform* image_transform() const override { return &transform_; }
  bool read_encoded(int64_t index, std::vector<uint8_t>& bytes, int64_t& label, std::string& name) const override;
  // The shards rank `rank` of `world` opens in `epoch`, in the epoch's
  // order, each with the part of it the rank reads: what its host must hold.
  std::vector<ShardPart> rank_shards(int64_t epoch, uint64_t seed, int rank, int world, bool shuffle) const;
  const ShardFile& shard_file(size_t s) const { return shards_[s]->file; }

 private:
  struct Example {
    std::string image;  // member name
    uint64_t offset = 0, size = 0;
    int64_t label = -1;
    std::string problem;  // why it cannot be used ("" when it can)
  };
  struct Shard {
    ShardFile file;
    int64_t first = 0;  // global index of its first example
    std::once_flag indexed;
    int fd = -1;
    std::string problem;  // the shard cannot be opened or read at all
    std::vector<Example> examples;
  };
  // The epoch's generator (the shard order, then the shuffle buffer's seed).
  static std::mt19937_64 epoch_rng(int64_t epoch, uint64_t seed) {
    return std::mt19937_64(seed * 1000003ull + static_cast<uint64_t>(epoch));
  }
  std::vector<ShardPart> slice_parts(std::mt19937_64& rng, int rank, int world, bool shuffle) const;
  const Shard& indexed(size_t s) const;
  void index(Shard& shard) const;
  // "" or why example `i` of shard `s` cannot be used; fills dst and label.
  std::string try_read(const Shard& shard, int64_t i, float* dst, uint64_t seed, int64_t& label) const;

  std::vector<std::unique_ptr<Shard>> shards_;
  int64_t total_ = 0, num_classes_;
  ImageTransform transform_;
  int64_t shuffle_buffer_;
  bool skip_bad_;
  std::string origin_;
};

}  // namespace poseidon
