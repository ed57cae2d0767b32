// The data verb: `poseidon data shard` turns an image folder or list file
// into tar shards in WebDataset's layout, with the index the tar_shards
// source reads.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "tools/cli/commands.h"
#ifdef POSEIDON_HAVE_IMAGES
#include "data/shard_writer.h"
#endif

namespace poseidon {

int cmd_data_shard(const DataShardArgs& args) {
#ifdef POSEIDON_HAVE_IMAGES
  POSEIDON_REQUIRE(args.folder.empty() != args.list.empty())
      << "poseidon data shard: give --folder or --list, one of them";
  ShardWriteOptions options;
  options.prefix = args.out;
  options.per_shard = args.per_shard;
  options.shuffle_seed = args.seed;
  std::vector<ImageEntry> entries;
  if (!args.folder.empty()) {
    std::vector<std::string> classes;
    entries = scan_image_folder(args.folder, classes);
    options.num_classes = static_cast<int64_t>(classes.size());
  } else {
    entries = read_image_list(args.list,
                              args.root.empty() ? std::filesystem::path(args.list).parent_path().string() : args.root,
                              "the command line (--list)");
    for (const ImageEntry& e : entries) options.num_classes = std::max(options.num_classes, e.label + 1);
  }
  const std::vector<std::string> shards = write_shards(std::move(entries), options);
  std::printf("%zu shards (%s ... %s), index %s.json, %lld classes\n", shards.size(), shards.front().c_str(),
              shards.back().c_str(), args.out.c_str(), static_cast<long long>(options.num_classes));
  return 0;
#else
  throw Error("poseidon data shard needs the image pipeline, which this build leaves out (POSEIDON_IMAGES=OFF)");
#endif
}

}  // namespace poseidon
