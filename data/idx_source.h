// IDX files (the MNIST format, gzipped or not): an images file of
// [N, rows, cols] (or [N, C, rows, cols]) unsigned bytes and a labels file of
// [N] unsigned bytes. Pixels become floats as (pixel * scale - mean) / std.
#pragma once

#include <string>
#include <vector>

#include "data/source.h"

namespace poseidon {

// Reads a whole IDX file, gunzipping when it starts with the gzip magic.
// Returns the dimensions and fills `bytes` with the ubyte payload.
std::vector<int64_t> read_idx(const std::string& path, std::vector<uint8_t>& bytes);

class IdxSource : public Source {
 public:
  IdxSource(const std::string& images, const std::string& labels, float scale, float mean,
            float std, int64_t limit);
  int64_t size() const override { return count_; }
  Shape sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }
  int64_t read(int64_t index, float* dst, uint64_t seed) const override;
  std::string find_label_outside(int64_t classes, int64_t ignored) const override;

 private:
  std::string labels_path_;
  std::vector<uint8_t> pixels_, labels_;
  Shape shape_;
  int64_t count_ = 0, classes_ = 0;
  float scale_, mean_, std_;
};

}  // namespace poseidon
