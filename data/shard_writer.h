// Writes labelled images as tar shards in WebDataset's layout
// (`KEY.<ext>` + `KEY.cls`, shards `<prefix>-000000.tar`) and the index
// `<prefix>.json` (WebDataset's shard list, with `nsamples` per shard, plus
// `num_classes`), which the tar_shards source reads. Images are stored as
// their files' bytes, not re-encoded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image_source.h"

namespace poseidon {

struct ShardWriteOptions {
  std::string prefix;         // e.g. out/train: out/train-000000.tar ..., out/train.json
  int64_t per_shard = 1000;   // examples per shard (the last may hold fewer)
  uint64_t shuffle_seed = 1;  // 0: the entries' order, else shuffled (folders list classes one after another)
  int64_t num_classes = 0;
};

// Returns the shard paths written. Throws Error naming an image that cannot
// be read or a file that cannot be written.
std::vector<std::string> write_shards(std::vector<ImageEntry> entries, const ShardWriteOptions& options);

}  // namespace poseidon
