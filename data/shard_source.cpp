// Tar shard source: index files, lazy shard indexing through pread (one
// descriptor per shard, shared by the worker threads), the per-epoch order
// of shards and ranks, and reading an example's image and label.
#include "data/shard_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "data/image_decode.h"

namespace poseidon {

namespace fs = std::filesystem;

namespace {
bool is_image_extension(const std::string& ext) {
  return ext == "jpg" || ext == "jpeg" || ext == "png" || ext == "bmp";
}

size_t pread_all(int fd, uint64_t offset, size_t size, uint8_t* dst) {
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, dst + done, size - done, static_cast<off_t>(offset + done));
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

// "" and the members of a tar file, or why it cannot be listed.
std::string list_file(int fd, std::vector<TarMember>& members) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "cannot read the file";
  return list_tar([fd](uint64_t offset, size_t size, uint8_t* dst) { return pread_all(fd, offset, size, dst); },
                  static_cast<uint64_t>(st.st_size), members);
}

// The label of a .cls member: decimal digits, surrounding whitespace allowed.
bool parse_label(const std::string& text, int64_t& label) {
  size_t begin = text.find_first_not_of(" \t\r\n"), end = text.find_last_not_of(" \t\r\n");
  if (begin == std::string::npos || end - begin >= 18) return false;
  label = 0;
  for (size_t i = begin; i <= end; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    label = label * 10 + (text[i] - '0');
  }
  return true;
}
}  // namespace

std::vector<ShardFile> read_shard_index(const std::string& index, int64_t& num_classes) {
  std::ifstream in(index);
  if (!in) throw Error(index + ": cannot open the shard index");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(index + ": not a JSON shard index (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("shardlist") || !j["shardlist"].is_array() || j["shardlist"].empty())
    throw Error(index + ": expected {\"shardlist\": [{\"url\": ..., \"nsamples\": ...}, ...]} with at least one shard");
  num_classes = 0;
  if (j.contains("num_classes")) {
    if (!j["num_classes"].is_number_integer() || j["num_classes"].get<int64_t>() <= 0)
      throw Error(index + ": num_classes must be a positive integer");
    num_classes = j["num_classes"].get<int64_t>();
  }
  std::vector<ShardFile> shards;
  const fs::path folder = fs::path(index).parent_path();
  for (const auto& entry : j["shardlist"]) {
    const std::string at = index + ": shard " + std::to_string(shards.size());
    if (!entry.is_object() || !entry.contains("url") || !entry["url"].is_string())
      throw Error(at + ": expected {\"url\": \"<file>.tar\", \"nsamples\": <count>}");
    if (!entry.contains("nsamples") || !entry["nsamples"].is_number_integer() || entry["nsamples"].get<int64_t>() < 0)
      throw Error(at + " (" + entry["url"].get<std::string>() + "): nsamples must be a non-negative integer");
    fs::path path = entry["url"].get<std::string>();
    if (path.is_relative()) path = folder / path;
    shards.push_back({path.lexically_normal().string(), entry["nsamples"].get<int64_t>()});
  }
  return shards;
}

std::vector<ShardFile> count_shard_examples(const std::vector<std::string>& tars) {
  std::vector<ShardFile> shards;
  for (const std::string& path : tars) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open the shard");
    std::vector<TarMember> members;
    const std::string problem = list_file(fd, members);
    ::close(fd);
    if (!problem.empty()) throw Error(path + ": " + problem);
    shards.push_back({path, static_cast<int64_t>(group_by_key(members).size())});
  }
  return shards;
}

ShardSource::ShardSource(std::vector<ShardFile> shards, int64_t num_classes, ImageTransform transform,
                         int64_t shuffle_buffer, bool skip_bad, std::string origin)
    : num_classes_(num_classes),
      transform_(std::move(transform)),
      shuffle_buffer_(std::max<int64_t>(1, shuffle_buffer)),
      skip_bad_(skip_bad),
      origin_(std::move(origin)) {
  for (ShardFile& f : shards) {
    auto s = std::make_unique<Shard>();
    s->file = std::move(f);
    s->first = total_;
    total_ += s->file.examples;
    shards_.push_back(std::move(s));
  }
  POSEIDON_REQUIRE(total_ > 0) << origin_ << ": the shards hold no example";
  POSEIDON_REQUIRE(num_classes_ > 0) << origin_ << ": the number of classes must be positive";
}

ShardSource::~ShardSource() {
  for (auto& s : shards_)
    if (s->fd >= 0) ::close(s->fd);
}

void ShardSource::index(Shard& shard) const {
  shard.fd = ::open(shard.file.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (shard.fd < 0) {
    shard.problem = "cannot open the shard (this rank reads it in this epoch)";
    return;
  }
  std::vector<TarMember> members;
  const std::string cut = list_file(shard.fd, members);
  std::vector<TarExample> groups = group_by_key(members);
  // A cut inside a group leaves that example incomplete: it goes too.
  if (!cut.empty() && !groups.empty()) groups.pop_back();
  for (const TarExample& g : groups) {
    Example e;
    std::string label_member;
    for (size_t m : g.members) {
      const std::string ext = member_extension(members[m].name);
      if (is_image_extension(ext) && e.image.empty()) {
        e.image = members[m].name;
        e.offset = members[m].offset;
        e.size = members[m].size;
      } else if (ext == "cls") {
        label_member = members[m].name;
        std::string text(std::min<uint64_t>(members[m].size, 64), '\0');
        text.resize(pread_all(shard.fd, members[m].offset, text.size(), reinterpret_cast<uint8_t*>(text.data())));
        if (members[m].size > 64 || !parse_label(text, e.label))
          e.problem = "member '" + label_member + "': the label is not a non-negative integer";
      }
    }
    if (e.image.empty())
      e.problem = "example '" + g.key + "' has no .jpg, .jpeg, .png or .bmp member";
    else if (label_member.empty())
      e.problem = "example '" + g.key + "' has no .cls member (its label)";
    else if (e.problem.empty() && e.label >= num_classes_)
      e.problem = "member '" + label_member + "': label " + std::to_string(e.label) + " is outside [0, " +
                  std::to_string(num_classes_) + ")";
    shard.examples.push_back(std::move(e));
  }
  if (!cut.empty()) shard.problem = cut;
}

const ShardSource::Shard& ShardSource::indexed(size_t s) const {
  Shard& shard = *shards_[s];
  std::call_once(shard.indexed, [&] { index(shard); });
  return shard;
}

std::string ShardSource::try_read(const Shard& shard, int64_t i, float* dst, uint64_t seed, int64_t& label) const {
  if (i >= static_cast<int64_t>(shard.examples.size())) {
    if (!shard.problem.empty()) return shard.problem;
    return "example " + std::to_string(i) + " is missing: the shard holds " + std::to_string(shard.examples.size()) +
           " examples, its index says " + std::to_string(shard.file.examples);
  }
  const Example& e = shard.examples[i];
  if (!e.problem.empty()) return e.problem;
  std::vector<uint8_t> bytes(e.size);
  if (pread_all(shard.fd, e.offset, e.size, bytes.data()) != e.size) return "member '" + e.image + "': cannot be read";
  const std::string problem = decode_transformed(transform_, bytes.data(), bytes.size(), dst, seed,
                                                 origin_ + ": " + shard.file.path + ": member '" + e.image + "'");
  if (!problem.empty()) return "member '" + e.image + "': " + problem;
  label = e.label;
  return "";
}

int64_t ShardSource::read(int64_t index, float* dst, uint64_t seed) const {
  int64_t skipped = 0;
  return read_skipping(index, dst, seed, skipped);
}

bool ShardSource::read_encoded(int64_t index, std::vector<uint8_t>& bytes, int64_t& label, std::string& name) const {
  POSEIDON_CHECK(index >= 0 && index < total_) << "example " << index << " of " << total_;
  const auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                                   [](int64_t i, const std::unique_ptr<Shard>& s) { return i < s->first; });
  const Shard& shard = indexed(static_cast<size_t>(it - shards_.begin()) - 1);
  const int64_t at = index - shard.first;
  if (at >= static_cast<int64_t>(shard.examples.size())) return false;
  const Example& e = shard.examples[static_cast<size_t>(at)];
  if (!e.problem.empty()) return false;
  bytes.resize(e.size);
  if (pread_all(shard.fd, e.offset, e.size, bytes.data()) != e.size) return false;
  label = e.label;
  name = origin_ + ": " + shard.file.path + ": member '" + e.image + "'";
  return true;
}

int64_t ShardSource::read_skipping(int64_t index, float* dst, uint64_t seed, int64_t& skipped) const {
  POSEIDON_CHECK(index >= 0 && index < total_) << "example " << index << " of " << total_;
  const auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                                   [](int64_t i, const std::unique_ptr<Shard>& s) { return i < s->first; });
  const size_t s = static_cast<size_t>(it - shards_.begin()) - 1;
  const Shard& shard = indexed(s);
  const int64_t count = shard.file.examples, at = index - shard.first;
  for (int64_t k = 0; k < count; ++k) {
    int64_t label = 0;
    const std::string problem = try_read(shard, (at + k) % count, dst, seed, label);
    if (problem.empty()) {
      skipped += k;
      return label;
    }
    if (!skip_bad_) throw Error(origin_ + ": " + shard.file.path + ": " + problem + " (on_error: skip passes over it)");
  }
  throw Error(origin_ + ": " + shard.file.path + ": none of its examples can be used" +
              (shard.problem.empty() ? "" : " (" + shard.problem + ")"));
}

std::vector<ShardPart> ShardSource::slice_parts(std::mt19937_64& rng, int rank, int world, bool shuffle) const {
  std::vector<size_t> order(shards_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (shuffle)
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  const int64_t per_rank = total_ / world, begin = per_rank * rank, end = begin + per_rank;
  std::vector<ShardPart> parts;
  int64_t at = 0;  // position in the epoch's sequence
  for (size_t s : order) {
    const int64_t lo = std::max(begin, at), hi = std::min(end, at + shards_[s]->file.examples);
    if (lo < hi) parts.push_back({s, lo - at, hi - at});
    at += shards_[s]->file.examples;
  }
  return parts;
}

std::vector<ShardPart> ShardSource::rank_shards(int64_t epoch, uint64_t seed, int rank, int world,
                                                bool shuffle) const {
  std::mt19937_64 rng = epoch_rng(epoch, seed);
  return slice_parts(rng, rank, world, shuffle);
}

std::vector<int64_t> ShardSource::rank_order(int64_t epoch, uint64_t seed, int rank, int world, bool shuffle) const {
  std::mt19937_64 rng = epoch_rng(epoch, seed);
  std::vector<int64_t> slice;
  slice.reserve(static_cast<size_t>(total_ / world));
  for (const ShardPart& part : slice_parts(rng, rank, world, shuffle))
    for (int64_t i = part.begin; i < part.end; ++i) slice.push_back(shards_[part.shard]->first + i);
  if (!shuffle || shuffle_buffer_ <= 1) return slice;
  // WebDataset's shuffle(): fill a buffer, then emit a random element of it for each new one.
  std::mt19937_64 pick(rng() ^ (static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull));
  std::vector<int64_t> buffer, out;
  out.reserve(slice.size());
  for (int64_t x : slice) {
    buffer.push_back(x);
    if (static_cast<int64_t>(buffer.size()) < shuffle_buffer_) continue;
    const size_t j = pick() % buffer.size();
    out.push_back(buffer[j]);
    buffer[j] = buffer.back();
    buffer.pop_back();
  }
  while (!buffer.empty()) {
    const size_t j = pick() % buffer.size();
    out.push_back(buffer[j]);
    buffer[j] = buffer.back();
    buffer.pop_back();
  }
  return out;
}

}  // namespace poseidon
