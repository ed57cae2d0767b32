// Tensor storage and views.
#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

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

Storage::Storage(size_t count, Device device) : count_(count), device_(device) {
  data_ = static_cast<float*>(device_memory::allocate(device_, std::max<size_t>(1, count) * sizeof(float)));
}

Storage::~Storage() { device_memory::release(device_, data_, std::max<size_t>(1, count_) * sizeof(float)); }

Tensor::Tensor(Shape shape, Device device) : shape_(std::move(shape)), device_(device) {
  numel_ = shape_numel(shape_);
  storage_ = std::make_shared<Storage>(numel_, device_);
}

Tensor Tensor::on(Device device) {
  Tensor t;
  t.device_ = device;
  return t;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  if (storage_) device_ = storage_->device();
  POSEIDON_CHECK(storage_ && offset_ + numel_ <= storage_->count())
      << "view " << shape_str(shape_) << " at " << offset_ << " exceeds storage";
}

void Tensor::resize(const Shape& shape) {
  int64_t n = shape_numel(shape);
  if (!storage_ || offset_ + n > storage_->count()) {
    storage_ = std::make_shared<Storage>(n, device_);
    offset_ = 0;
  }
  shape_ = shape;
  numel_ = n;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  POSEIDON_CHECK(shape_numel(shape) == numel_) << shape_str(shape) << " vs " << shape_str(shape_);
  return Tensor(storage_, offset_, shape);
}

void Tensor::fill(float v) {
  if (numel_) device_memory::fill(device_, data(), numel_, v);
}

float Tensor::item(int64_t i) const {
  POSEIDON_CHECK(i >= 0 && i < numel_) << "element " << i << " of " << shape_str(shape_);
  if (!is_cuda()) return data()[i];
  float v = 0.f;
  device_memory::copy(&v, Device{}, data() + i, device_, 1);
  return v;
}

void Tensor::copy_from(const Tensor& other) {
  POSEIDON_CHECK(other.numel() == numel_) << shape_str(other.shape()) << " into " << shape_str(shape_);
  if (numel_) device_memory::copy(data(), device_, other.data(), other.device_, numel_);
}

Tensor Tensor::to(const Device& device) const {
  if (device == device_) return *this;
  Tensor t(shape_, device);
  t.copy_from(*this);
  return t;
}

}  // namespace poseidon
