// Runs the PyTorch reference scripts of tests/torch with Debian's
// python3-torch (/usr/bin/python3), for the tests that compare numerics
// with PyTorch.
#pragma once

#include <string>

#include "core/safetensors.h"
#include "core/tensor.h"

namespace poseidon::testing {

struct ScriptResult {
  int status = -1;     // exit status, -1 if it did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs tests/torch/<script> with `args` (already shell-quoted where needed).
ScriptResult run_torch_script(const std::string& script, const std::string& args);
// Empty when /usr/bin/python3 imports torch; otherwise why it does not.
std::string torch_unavailable();
// POSEIDON_SKIP_TORCH=1: a missing torch skips these tests instead of failing them.
bool torch_skip_requested();
std::string shell_quoted(const std::string& s);
// A host tensor holding a reference file's tensor.
Tensor tensor_of(const SafetensorsTensor& t);
// max |ours - ref| / max |ref| over the whole output. Activations are sums
// of thousands of terms that cancel near zero, where float32 rounding is of
// the order of the largest terms: PyTorch's own float32 forward is off by
// 1e-3 from float64 on such elements, element by element, and by 2e-6 in
// this measure.
double relative_error(const Tensor& ours, const SafetensorsTensor& ref);

}  // namespace poseidon::testing

// In a test body: fails (or, with POSEIDON_SKIP_TORCH=1, skips) unless torch imports.
#define POSEIDON_REQUIRE_TORCH()                                                                  \
  do {                                                                                            \
    const std::string torch_missing = ::poseidon::testing::torch_unavailable();                   \
    if (!torch_missing.empty()) {                                                                 \
      if (::poseidon::testing::torch_skip_requested()) GTEST_SKIP() << torch_missing;             \
      FAIL() << torch_missing << "\ninstall python3-torch, or set POSEIDON_SKIP_TORCH=1 to skip"; \
    }                                                                                             \
  } while (0)
