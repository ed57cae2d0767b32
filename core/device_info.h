// What the build and the machine offer for GPUs, for `poseidon info`: the
// versions of the CUDA libraries this binary was built with and runs with,
// and the visible devices. Empty without the CUDA backend.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace poseidon::device_info {

struct Library {
  std::string name;     // "CUDA runtime", "cuDNN", ...
  std::string version;  // "13.0", "9.19.0", ...; "none" when not available
};

struct Gpu {
  int index = 0;
  std::string name;
  size_t memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
};

// The engine's CUDA libraries, then those reported by the modules that link
// libraries of their own.
std::vector<Library> cuda_libraries();
// A module's library, listed by cuda_libraries() with the version `version`
// reads; called once, from a static initialiser of a CUDA-built object.
void report_library(std::string name, std::function<std::string()> version);
std::vector<Gpu> visible_gpus();

}  // namespace poseidon::device_info
