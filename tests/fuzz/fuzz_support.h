// Shared pieces of the libFuzzer targets: a scratch folder for inputs that the
// parsers read from files, the rule that poseidon::Error is the expected way
// to reject bad input, and an allocation budget, so that an input describing
// a huge model is rejected quickly instead of exhausting the machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace poseidon::fuzz {

// Inputs larger than this are skipped by every target: a parser's work per
// input must stay small for the fuzzer to explore.
constexpr size_t kMaxInputBytes = 16384;

// A folder private to this process, removed at exit.
const std::string& scratch_dir();
// Writes `size` bytes to scratch_dir()/name and returns the path.
std::string write_file(const std::string& name, const uint8_t* data, size_t size);
std::string write_file(const std::string& name, const std::string& text);
// The tests/fuzz/inputs folder of the source tree (fixed models and configs).
std::string input_path(const std::string& name);

// While alive, heap allocations beyond `bytes` more than were live at its
// start throw std::bad_alloc (a single allocation above 32 MiB always does),
// as an allocation beyond the machine's memory would.
class AllocationBudget {
 public:
  explicit AllocationBudget(int64_t bytes);
  ~AllocationBudget();
  AllocationBudget(const AllocationBudget&) = delete;
  AllocationBudget& operator=(const AllocationBudget&) = delete;
};

// Runs `parse`. A poseidon::Error (ConfigError included) is the parser
// rejecting bad input, which is fine; any other exception escapes, and
// libFuzzer reports it as a crash.
template <class Parse>
void accept_or_reject(Parse&& parse) {
  try {
    parse();
  } catch (const Error&) {
  }
}

}  // namespace poseidon::fuzz
