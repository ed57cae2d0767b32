// Image folder and list-file sources: scanning, list parsing, and decoding
// (data/image_decode.h), with each unreadable image either an error naming it or
// (on_error: skip) replaced by the next decodable image.
#include "data/image_source.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/paths.h"
#include "data/image_decode.h"

namespace poseidon {

namespace fs = std::filesystem;

namespace {
bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

// A class's images in the order of torchvision's sorted(os.walk(...)): by
// folder, then by file name.
std::vector<std::string> images_under(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink))
    if (entry.is_regular_file() && is_image_file(entry.path()))
      found.emplace_back(entry.path().parent_path().string(), entry.path().filename().string());
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (const auto& [folder, name] : found) paths.push_back((fs::path(folder) / name).string());
  return paths;
}

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") + 1 - begin);
}
}  // namespace

std::vector<ImageEntry> scan_image_folder(const std::string& root, std::vector<std::string>& classes) {
  std::error_code unusable;  // a path the system rejects (too long, ...) is no folder either
  if (!fs::is_directory(root, unusable)) throw Error(root + ": no such folder");
  std::vector<ImageEntry> entries;
  try {
    classes.clear();
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory()) classes.push_back(entry.path().filename().string());
    std::sort(classes.begin(), classes.end());
    if (classes.empty()) throw Error(root + ": no class folders (expected " + root + "/<class name>/<images>)");
    for (size_t label = 0; label < classes.size(); ++label) {
      std::vector<std::string> paths = images_under(fs::path(root) / classes[label]);
      if (paths.empty())
        throw Error(root + ": class folder '" + classes[label] + "' holds no image (.jpg, .jpeg, .png or .bmp)");
      for (auto& path : paths) entries.push_back({std::move(path), static_cast<int64_t>(label)});
    }
  } catch (const fs::filesystem_error& e) {
    throw Error(root + ": cannot list the image folder (" + e.code().message() + ": " + e.path1().string() + ")");
  }
  return entries;
}

std::vector<ImageEntry> read_image_list(const std::string& list, const std::string& root, const std::string& origin) {
  if (const std::string why = why_not_a_file(list); !why.empty()) throw Error(list + ": the list file " + why);
  std::ifstream in(list);
  if (!in) throw Error(list + ": cannot open the list file");
  std::vector<ImageEntry> entries;
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    const std::string text = trim(raw);
    if (text.empty()) continue;
    auto bad = [&](const std::string& what) {
      throw ConfigError({list, line, 0, ""}, what + " (list file named at " + origin + ")");
    };
    size_t split = text.find_last_of(" \t");
    if (split == std::string::npos) bad("expected '<relative path> <label>', found '" + text + "'");
    const std::string label = text.substr(split + 1);
    if (!std::all_of(label.begin(), label.end(), [](unsigned char ch) { return std::isdigit(ch); }) ||
        label.size() > 18)
      bad("the label '" + label + "' is not a non-negative integer");
    fs::path path = trim(text.substr(0, split));
    if (path.is_relative()) path = fs::path(root) / path;
    entries.push_back({path.lexically_normal().string(), std::stoll(label), line});
  }
  if (entries.empty()) throw Error(list + ": the list file names no image");
  return entries;
}

ImageSource::ImageSource(std::vector<ImageEntry> entries, int64_t num_classes, ImageTransform transform,
                         bool skip_unreadable, std::string origin, std::string list_file)
    : entries_(std::move(entries)),
      num_classes_(num_classes),
      transform_(std::move(transform)),
      skip_unreadable_(skip_unreadable),
      origin_(std::move(origin)),
      list_file_(std::move(list_file)),
      unreadable_(new std::atomic<bool>[entries_.size()]) {
  POSEIDON_CHECK(!entries_.empty()) << "an image source needs images";
  for (size_t i = 0; i < entries_.size(); ++i) unreadable_[i] = false;
}

int64_t ImageSource::read(int64_t index, float* dst, uint64_t seed) const {
  int64_t skipped = 0;
  return read_skipping(index, dst, seed, skipped);
}

int64_t ImageSource::read_skipping(int64_t index, float* dst, uint64_t seed, int64_t& skipped) const {
  const int64_t n = size();
  std::vector<uint8_t> bytes;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t j = (index + k) % n;
    if (unreadable_[j]) continue;  // each unreadable image is decoded (and fails) once
    const std::string& path = entries_[j].path;
    std::string problem = read_whole_file(path, bytes);
    if (problem.empty()) problem = decode_transformed(transform_, bytes.data(), bytes.size(), dst, seed, origin_ + ": " + path);
    if (problem.empty()) {
      skipped += k;
      return entries_[j].label;
    }
    if (!skip_unreadable_) throw Error(origin_ + ": " + path + ": " + problem + " (on_error: skip passes over it)");
    unreadable_[j] = true;
  }
  throw Error(origin_ + ": none of the " + std::to_string(n) + " images can be decoded");
}

bool ImageSource::read_encoded(int64_t index, std::vector<uint8_t>& bytes, int64_t& label, std::string& name) const {
  if (unreadable_[index]) return false;
  const std::string& path = entries_[index].path;
  if (!read_whole_file(path, bytes).empty()) return false;
  label = entries_[index].label;
  name = origin_ + ": " + path;
  return true;
}

std::string ImageSource::find_label_outside(int64_t classes, int64_t ignored) const {
  for (const ImageEntry& e : entries_) {
    if (e.label < classes || e.label == ignored) continue;
    const std::string label = "label " + std::to_string(e.label) + " of '" + e.path + "'";
    if (e.line > 0) return list_file_ + ":" + std::to_string(e.line) + ": " + label;
    return label + " (its class folder's index)";
  }
  return "";
}

}  // namespace poseidon
