// Tensor: an n-dimensional view over reference-counted storage of float32
// or bfloat16 elements (core/dtype.h). Views let the Net keep all parameters
// in one contiguous buffer and all gradients in another (buckets and blocks
// for communication are slices). Code reads a tensor through the accessor
// of its type: data() for float32, bf16_data() for bfloat16; each refuses a
// tensor of the other type, so a layer that has no bfloat16 path cannot
// read a bfloat16 blob as floats by mistake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace poseidon {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[64, 1, 28, 28]"

// A flat, zero-initialised buffer of `count` elements of one type on one
// device (64-byte aligned on the host; from the caching allocator on a GPU).
class Storage {
 public:
  explicit Storage(size_t count, Device device = {}, DType dtype = DType::f32);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* bytes() { return bytes_; }
  size_t count() const { return count_; }  // elements
  DType dtype() const { return dtype_; }
  const Device& device() const { return device_; }

 private:
  void* bytes_ = nullptr;
  size_t count_ = 0;
  DType dtype_ = DType::f32;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;
  // Fresh zeroed storage.
  explicit Tensor(Shape shape, Device device = {}, DType dtype = DType::f32);
  // An empty tensor whose storage, once resized, lives on `device` and
  // holds `dtype`.
  static Tensor on(Device device, DType dtype = DType::f32);
  // A view of `shape` starting `offset` elements into `storage`.
  Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? i + shape_.size() : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  bool empty() const { return numel_ == 0; }
  bool defined() const { return storage_ != nullptr; }
  const Device& device() const { return device_; }
  bool is_cuda() const { return device_.is_cuda(); }
  DType dtype() const { return dtype_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  // On a GPU these are device pointers: the element accessors below are for
  // host tensors only; item() reads one element, widened to float, from any
  // device and type. data() throws Error for a bfloat16 tensor, bf16_data()
  // (the elements' 16 bits) for a float32 one.
  float* data() { return static_cast<float*>(typed(DType::f32)); }
  const float* data() const { return static_cast<const float*>(typed(DType::f32)); }
  uint16_t* bf16_data() { return static_cast<uint16_t*>(typed(DType::bf16)); }
  const uint16_t* bf16_data() const { return static_cast<const uint16_t*>(typed(DType::bf16)); }
  float& operator[](int64_t i) { return data()[i]; }
  float operator[](int64_t i) const { return data()[i]; }
  float item(int64_t i = 0) const;

  // Gives the tensor `shape`, reusing storage when it is large enough (contents
  // then are unspecified) and allocating fresh zeroed storage otherwise.
  void resize(const Shape& shape);
  // Changes the element type; the storage is dropped (a later resize
  // allocates it anew) unless the type is the one held already.
  void set_dtype(DType dtype);
  // Same element count, new shape; shares storage.
  Tensor reshaped(const Shape& shape) const;

  void fill(float v);  // v rounded to bfloat16 in a bfloat16 tensor
  void zero() { fill(0.f); }
  // Equal numel; any two devices. Between types it casts: float32 into
  // bfloat16 rounds each element to nearest even (core/bf16.h), bfloat16
  // into float32 widens exactly; a cast runs on one device, so its two
  // tensors must share it.
  void copy_from(const Tensor& other);
  // A copy of this tensor on `device` (shares storage when already there).
  Tensor to(const Device& device) const;
  // A copy of this tensor holding `dtype` (shares storage when it already does).
  Tensor to(DType dtype) const;

 private:
  // The first element, checked to be of type `want`.
  void* typed(DType want) const {
    if (dtype_ != want) refuse_access(want);
    return storage_ ? static_cast<char*>(storage_->bytes()) + offset_ * dtype_size(dtype_) : nullptr;
  }
  [[noreturn]] void refuse_access(DType want) const;

  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;  // elements
  Shape shape_;
  int64_t numel_ = 0;
  Device device_;
  DType dtype_ = DType::f32;
};

}  // namespace poseidon
