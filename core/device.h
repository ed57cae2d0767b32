// Device: where a tensor's memory lives and where a layer runs ("cpu",
// "cuda", "cuda:N"). Kept apart from Tensor so that the memory seam
// (core/device_memory.h) can name it without the Tensor class.
#pragma once

#include <string>

namespace poseidon {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;

  static Device parse(const std::string& s);  // "cpu", "cuda", "cuda:1"
  static Device cuda(int index = 0) { return {Kind::cuda, index}; }
  bool is_cuda() const { return kind == Kind::cuda; }
  std::string str() const;
  bool operator==(const Device&) const = default;
};

}  // namespace poseidon
