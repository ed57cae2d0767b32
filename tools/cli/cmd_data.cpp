// The data verb: `poseidon data shard` turns an image folder or list file
// into tar shards in WebDataset's layout, with the index the tar_shards
// source reads; `poseidon data placement` lists the shards each rank of a
// run opens, so that each host can be given only those.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "tools/cli/commands.h"
#include "tools/cli/train_config.h"
#ifdef POSEIDON_HAVE_IMAGES
#include "data/shard_source.h"
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

int cmd_data_placement(const DataPlacementArgs& args) {
#ifdef POSEIDON_HAVE_IMAGES
  const TrainConfig config = TrainConfig::load(args.config, args.overrides);
  const std::shared_ptr<Source> source = make_source(config.train_data.node, config.base_dir);
  const auto* shards = dynamic_cast<const ShardSource*>(source.get());
  if (!shards)
    throw Error(args.config + ": data.train: poseidon data placement lists tar shards; expected source: tar_shards");
  int64_t epochs = args.epochs;
  if (epochs == 0) {  // the epochs training reads: full batches of each rank's slice
    const int64_t batches = source->size() / args.ranks / config.train_data.batch_size;
    if (batches == 0)
      throw Error(args.config + ": data.train: " + std::to_string(source->size()) +
                  " examples are too few for one batch of " + std::to_string(config.train_data.batch_size) +
                  " on each of " + std::to_string(args.ranks) + " ranks");
    epochs = (config.solver.max_iter + batches - 1) / batches;
  }
  std::printf("# rank epoch shard first last: the shard's examples [first, last) the rank reads\n");
  for (int rank = 0; rank < args.ranks; ++rank)
    for (int64_t epoch = 0; epoch < epochs; ++epoch)
      for (const ShardPart& part : shards->rank_shards(epoch, config.seed, rank, args.ranks, config.train_data.shuffle))
        std::printf("%d %lld %s %lld %lld\n", rank, static_cast<long long>(epoch),
                    shards->shard_file(part.shard).path.c_str(), static_cast<long long>(part.begin),
                    static_cast<long long>(part.end));
  return 0;
#else
  throw Error("poseidon data placement needs the image pipeline, which this build leaves out (POSEIDON_IMAGES=OFF)");
#endif
}

}  // namespace poseidon
