// Tensor storage and views.
#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

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
    if (end && *end == '\0' && idx >= 0) return {Kind::cuda, static_cast<int>(idx)};
  }
  throw Error("unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return kind == Kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

Storage::Storage(size_t count) : count_(count) {
  size_t bytes = std::max<size_t>(64, (count * sizeof(float) + 63) / 64 * 64);
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, bytes);
}

Storage::~Storage() { std::free(data_); }

Tensor::Tensor(Shape shape) : shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  storage_ = std::make_shared<Storage>(numel_);
}

Tensor::Tensor(std::shared_ptr<Storage> storage, size_t offset, Shape shape)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  POSEIDON_CHECK(storage_ && offset_ + numel_ <= storage_->count())
      << "view " << shape_str(shape_) << " at " << offset_ << " exceeds storage";
}

void Tensor::resize(const Shape& shape) {
  int64_t n = shape_numel(shape);
  if (!storage_ || offset_ + n > storage_->count()) {
    storage_ = std::make_shared<Storage>(n);
    offset_ = 0;
  }
  shape_ = shape;
  numel_ = n;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  POSEIDON_CHECK(shape_numel(shape) == numel_) << shape_str(shape) << " vs " << shape_str(shape_);
  return Tensor(storage_, offset_, shape);
}

void Tensor::fill(float v) { std::fill(data(), data() + numel_, v); }

void Tensor::copy_from(const Tensor& other) {
  POSEIDON_CHECK(other.numel() == numel_) << shape_str(other.shape()) << " into " << shape_str(shape_);
  if (numel_) std::memcpy(data(), other.data(), numel_ * sizeof(float));
}

}  // namespace poseidon
