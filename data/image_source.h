// Image files as a Source: an image folder (root/class_name/**/*.jpg|jpeg|png|bmp,
// classes sorted by name become labels 0..C-1, as torchvision's ImageFolder)
// or a list file ("relative/path label" per line). Images are decoded when
// read (data/image_decode.h), converted to RGB and passed through an
// ImageTransform.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "data/source.h"
#include "data/transforms.h"

namespace poseidon {

struct ImageEntry {
  std::string path;
  int64_t label = 0;
  int64_t line = 0;  // in the list file; 0 when found in a folder
};

// The images under `root` in torchvision's order: class folders sorted by
// name, then each class's files (searched recursively) sorted by path.
// Fills `classes` with the folder names. Throws Error when `root` is missing,
// has no class folder, or a class folder holds no image.
std::vector<ImageEntry> scan_image_folder(const std::string& root, std::vector<std::string>& classes);

// Parses a list file; relative paths are taken against `root`. A malformed
// line is a ConfigError at that line of the list file, with `origin` (where
// the config names the list) in its message.
std::vector<ImageEntry> read_image_list(const std::string& list, const std::string& root, const std::string& origin);

class ImageSource : public Source {
 public:
  // `origin` (a config location) is quoted in read errors. With
  // `skip_unreadable`, an image that cannot be decoded is replaced by the next
  // decodable one in index order, and counted, instead of failing.
  // `list_file` is the list the entries come from ("" for a folder).
  ImageSource(std::vector<ImageEntry> entries, int64_t num_classes, ImageTransform transform, bool skip_unreadable,
              std::string origin, std::string list_file = "");

  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  Shape sample_shape() const override { return transform_.output_shape(); }
  int64_t num_classes() const override { return num_classes_; }
  int64_t read(int64_t index, float* dst, uint64_t seed) const override;
  int64_t read_skipping(int64_t index, float* dst, uint64_t seed, int64_t& skipped) const override;
  std::string find_label_outside(int64_t classes, int64_t ignored) const override;
  const ImageTransform* image_transform() const override { return &transform_; }
  bool read_encoded(int64_t index, std::vector<uint8_t>& bytes, int64_t& label, std::string& name) const override;

 private:
  std::vector<ImageEntry> entries_;
  int64_t num_classes_;
  ImageTransform transform_;
  bool skip_unreadable_;
  std::string origin_;
  std::string list_file_;
  // Images already found unreadable, so each is decoded (and fails) once.
  std::unique_ptr<std::atomic<bool>[]> unreadable_;
};

}  // namespace poseidon
