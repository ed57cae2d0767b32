// Tensor storage and views.
#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/bf16.h"
#include "core/device_memory.h"
#include "core/error.h"

namespace poseidon {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return {};
  if (s == "cuda") return {Kind::cuda, 0};
  if (s.rfind("cuda:", 0) == 0) {
    char* end = nullptr;
    long idx = std::strtol(s.c_str() + 5, &end, 10);
    if (end && *end == '\0' && end != s.c_str() + 5 && idx >= 0 && idx < 1024) return {Kind::cuda, static_cast<int>(idx)};
  }
  throw Error("unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return kind == Kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

Storage::Storage(size_t count, Device device, DType dtype) : count_(count), dtype_(dtype), device_(device) {
  bytes_ = device_memory::allocate(device_, std::max<size_t>(1, count) * dtype_size(dtype_));
}

Storage::~Storage() { device_memory::release(device_, bytes_, std::max<size_t>(1, count_) * dtype_size(dtype_)); }

Tensor::Tensor(Shape shape, Device device, DType dtype) : shape_(std::move(shape)), device_(device), dtype_(dtype) {
  numel_ = shape_numel(shape_);
  storage_ = std::make_shared<Storage>(numel_, device_, dtype_);
}

Tensor Tensor::on(Device device, DType dtype) {
  Tensor t;
  t.device_ = device;
  t.dtype_ = dtype;
  return t;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  if (storage_) {
    device_ = storage_->device();
    dtype_ = storage_->dtype();
  }
  POSEIDON_CHECK(storage_ && offset_ + numel_ <= storage_->count())
      << "view " << shape_str(shape_) << " at " << offset_ << " exceeds storage";
}

void Tensor::refuse_access(DType want) const {
  throw Error(std::string("a ") + dtype_name(dtype_) + " tensor " + shape_str(shape_) + " read as " +
              dtype_name(want) + " (" + (want == DType::f32 ? "data()" : "bf16_data()") +
              "): cast it first (Tensor::to, copy_from)");
}

void Tensor::resize(const Shape& shape) {
  int64_t n = shape_numel(shape);
  if (!storage_ || offset_ + n > storage_->count()) {
    storage_ = std::make_shared<Storage>(n, device_, dtype_);
    offset_ = 0;
  }
  shape_ = shape;
  numel_ = n;
}

void Tensor::set_dtype(DType dtype) {
  if (dtype == dtype_) return;
  dtype_ = dtype;
  storage_.reset();
  offset_ = 0;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  POSEIDON_CHECK(shape_numel(shape) == numel_) << shape_str(shape) << " vs " << shape_str(shape_);
  return Tensor(storage_, offset_, shape);
}

void Tensor::fill(float v) {
  if (!numel_) return;
  if (dtype_ == DType::f32) {
    device_memory::fill(device_, data(), numel_, v);
  } else if (is_cuda()) {
    device_memory::gpu_fill_bf16(device_, bf16_data(), numel_, to_bf16(v));
  } else {
    std::fill(bf16_data(), bf16_data() + numel_, to_bf16(v));
  }
}

float Tensor::item(int64_t i) const {
  POSEIDON_CHECK(i >= 0 && i < numel_) << "element " << i << " of " << shape_str(shape_);
  if (dtype_ == DType::bf16) {
    uint16_t h = 0;
    device_memory::copy_bytes(&h, Device{}, bf16_data() + i, device_, sizeof h);
    return from_bf16(h);
  }
  if (!is_cuda()) return data()[i];
  float v = 0.f;
  device_memory::copy(&v, Device{}, data() + i, device_, 1);
  return v;
}

void Tensor::copy_from(const Tensor& other) {
  POSEIDON_CHECK(other.numel() == numel_) << shape_str(other.shape()) << " into " << shape_str(shape_);
  if (!numel_) return;
  if (other.dtype_ == dtype_) {
    device_memory::copy_bytes(typed(dtype_), device_, other.typed(dtype_), other.device_, bytes());
    return;
  }
  POSEIDON_CHECK(other.device_ == device_) << "a cast from " << dtype_name(other.dtype_) << " on "
                                           << other.device_.str() << " into " << dtype_name(dtype_) << " on "
                                           << device_.str() << ": cast on one device, then copy";
  if (dtype_ == DType::bf16)
    device_memory::round_to_bf16(device_, bf16_data(), other.data(), numel_);
  else
    device_memory::widen_bf16(device_, data(), other.bf16_data(), numel_);
}

Tensor Tensor::to(const Device& device) const {
  if (device == device_) return *this;
  Tensor t(shape_, device, dtype_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor t(shape_, device_, dtype);
  t.copy_from(*this);
  return t;
}

}  // namespace poseidon
