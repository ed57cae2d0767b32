// Shard writing: entries in a seeded order, cut into shards of equal count.
#include "data/shard_writer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "data/image_decode.h"
#include "data/tar_reader.h"

namespace poseidon {

std::vector<std::string> write_shards(std::vector<ImageEntry> entries, const ShardWriteOptions& options) {
  POSEIDON_REQUIRE(options.per_shard > 0) << "examples per shard must be positive";
  POSEIDON_REQUIRE(!entries.empty()) << "no image to write";
  if (options.shuffle_seed != 0) {
    std::mt19937_64 rng(options.shuffle_seed);
    for (size_t i = entries.size(); i > 1; --i) std::swap(entries[i - 1], entries[rng() % i]);
  }
  const std::filesystem::path prefix(options.prefix);
  if (prefix.has_parent_path()) std::filesystem::create_directories(prefix.parent_path());
  nlohmann::json shardlist = nlohmann::json::array();
  std::vector<std::string> written;
  std::vector<uint8_t> bytes;
  for (size_t begin = 0; begin < entries.size(); begin += static_cast<size_t>(options.per_shard)) {
    const size_t end = std::min(entries.size(), begin + static_cast<size_t>(options.per_shard));
    std::vector<std::pair<std::string, std::string>> files;
    for (size_t i = begin; i < end; ++i) {
      const ImageEntry& e = entries[i];
      if (const std::string problem = read_whole_file(e.path, bytes); !problem.empty())
        throw Error(e.path + ": " + problem);
      std::string ext = std::filesystem::path(e.path).extension().string();
      for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      char key[32];
      std::snprintf(key, sizeof key, "%09zu", i);
      files.emplace_back(key + ext, std::string(bytes.begin(), bytes.end()));
      files.emplace_back(std::string(key) + ".cls", std::to_string(e.label));
    }
    char name[32];
    std::snprintf(name, sizeof name, "-%06zu.tar", written.size());
    const std::string path = options.prefix + name;
    write_tar(path, files);
    written.push_back(path);
    shardlist.push_back(
        {{"url", std::filesystem::path(path).filename().string()}, {"nsamples", static_cast<int64_t>(end - begin)}});
  }
  const nlohmann::json index = {{"__kind__", "wids-shard-index-v1"},
                                {"wids_version", 1},
                                {"name", prefix.filename().string()},
                                {"num_classes", options.num_classes},
                                {"shardlist", shardlist}};
  const std::string index_path = options.prefix + ".json";
  std::ofstream out(index_path);
  out << index.dump(1) << "\n";
  if (!out.flush()) throw Error(index_path + ": cannot write the shard index");
  return written;
}

}  // namespace poseidon
