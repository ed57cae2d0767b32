// Synthetic data: deterministic pseudo-random inputs and labels of any shape,
// for benchmarks and tests that must not depend on a dataset.
#pragma once

#include "data/source.h"

namespace poseidon {

class SyntheticSource : public Source {
 public:
  SyntheticSource(Shape shape, int64_t classes, int64_t size, uint64_t seed)
      : shape_(std::move(shape)), classes_(classes), size_(size), seed_(seed) {}
  int64_t size() const override { return size_; }
  Shape sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return classes_; }
  int64_t read(int64_t index, float* dst, uint64_t seed) const override;
  // Labels are drawn from [0, num_classes): any may lie outside [0, classes)
  // when num_classes is larger (unless the one extra is `ignored`).
  std::string find_label_outside(int64_t classes, int64_t ignored) const override {
    if (classes_ <= classes || (classes_ == classes + 1 && ignored == classes)) return "";
    return "synthetic labels up to " + std::to_string(classes_ - 1) + " (num_classes " + std::to_string(classes_) + ")";
  }

 private:
  Shape shape_;
  int64_t classes_, size_;
  uint64_t seed_;
};

}  // namespace poseidon
