// Tensor: an n-dimensional float32 view over reference-counted storage.
// Views let the Net keep all parameters in one contiguous buffer and all
// gradients in another (buckets and blocks for communication are slices).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace poseidon {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64, 1, 28, 28]"

// A flat, zero-initialised float buffer on one device (64-byte aligned on
// the host; from the caching allocator on a GPU).
class Storage {
 public:
  explicit Storage(size_t count, Device device = {});
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  float* data() { return data_; }
  size_t count() const { return count_; }
  const Device& device() const { return device_; }

 private:
  float* data_ = nullptr;
  size_t count_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Device device = {});  // fresh zeroed storage
  // An empty tensor whose storage, once resized, lives on `device`.
  static Tensor on(Device device);
  // A view of `shape` starting `offset` floats into `storage`.
  Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? i + shape_.size() : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  bool empty() const { return numel_ == 0; }
  bool defined() const { return storage_ != nullptr; }
  const Device& device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }

  // On a GPU these are device pointers: the element accessors below are for
  // host tensors only; item() reads one element from any device.
  float* data() { return storage_ ? storage_->data() + offset_ : nullptr; }
  const float* data() const { return storage_ ? storage_->data() + offset_ : nullptr; }
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }
  float item(int64_t i = 0) const;

  // Gives the tensor `shape`, reusing storage when it is large enough (contents
  // then are unspecified) and allocating fresh zeroed storage otherwise.
  void resize(const Shape& shape);
  // Same element count, new shape; shares storage.
  Tensor reshaped(const Shape& shape) const;

  void fill(float v);
  void zero() { fill(0.f); }
  void copy_from(const Tensor& other);  // equal numel; any two devices
  // A copy of this tensor on `device` (shares storage when already there).
  Tensor to(const Device& device) const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  Device device_;
};

}  // namespace poseidon
