// When a GPU test may skip. Without a GPU the GPU tests skip and say why,
// but where a GPU should be usable (nvidia-smi lists one, or
// POSEIDON_REQUIRE_GPU=1, as tools/gpu_check.sh sets) a runtime that cannot
// reach it fails them instead: otherwise a broken driver or library setup
// would read as "every test passed" with nothing run.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/device_memory.h"

namespace poseidon::testing {

// True when nvidia-smi runs and lists at least one GPU.
inline bool nvidia_smi_sees_a_gpu() {
  static const bool seen = [] {
    FILE* pipe = popen("nvidia-smi -L 2>/dev/null", "r");
    if (!pipe) return false;
    char line[512];
    bool gpu = false;
    while (std::fgets(line, sizeof line, pipe))
      if (std::string(line).rfind("GPU ", 0) == 0) gpu = true;
    pclose(pipe);
    return gpu;
  }();
  return seen;
}

inline bool gpu_required() {
  const char* require = std::getenv("POSEIDON_REQUIRE_GPU");
  if (require && std::string(require) == "1") return true;
  return device_memory::cuda_built() && nvidia_smi_sees_a_gpu();
}

// Why GPU tests cannot run here, for a skip or a failure.
inline std::string gpu_unusable_reason() {
  return device_memory::cuda_unavailable_reason() +
         (gpu_required() ? " (yet a GPU is expected here: nvidia-smi lists one or POSEIDON_REQUIRE_GPU=1)" : "");
}

}  // namespace poseidon::testing

// Skips the test without a usable GPU, or fails it where one is expected.
#define POSEIDON_SKIP_WITHOUT_GPU()                                                      \
  do {                                                                                   \
    if (::poseidon::device_memory::cuda_device_count() == 0) {                           \
      if (::poseidon::testing::gpu_required()) FAIL() << ::poseidon::testing::gpu_unusable_reason(); \
      GTEST_SKIP() << ::poseidon::testing::gpu_unusable_reason();                        \
    }                                                                                    \
  } while (0)
