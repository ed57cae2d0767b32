// Fuzz target: a tar shard in WebDataset's layout as the tar_shards source
// reads it: tar headers (ustar, GNU long names, PAX records, sizes, the
// checksum), grouping by key, labels, and decoding every example's image
// (on_error: skip, so a bad example is passed over; a shard with none usable
// is an Error).
#include <vector>

#include "data/shard_source.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size > fuzz::kMaxInputBytes) return 0;
  const std::string shard = fuzz::write_file("shard.tar", data, size);
  fuzz::accept_or_reject([&] {
    std::vector<ShardFile> shards = count_shard_examples({shard});
    if (shards.front().examples == 0) return;
    ImageTransformConfig t;
    t.rrc_h = t.rrc_w = 8;
    ShardSource source(std::move(shards), 4, ImageTransform(t), 4, true, "fuzz");
    std::vector<float> example(static_cast<size_t>(shape_numel(source.sample_shape())));
    for (int64_t i = 0; i < source.size(); ++i) {
      int64_t skipped = 0;
      const int64_t label = source.read_skipping(i, example.data(), static_cast<uint64_t>(i), skipped);
      if (label < 0 || label >= 4) __builtin_trap();
    }
  });
  return 0;
}
