// The allocation budget of the corpus replay in the normal build, where the
// sanitizer's allocation hooks are absent: the process's address space is
// limited (RLIMIT_AS) to what it uses at the budget's start, the budget, and
// room for the threads a target may start (stacks and malloc arenas), so an
// input describing a huge model gets std::bad_alloc instead of the machine's
// memory. Looser than the sanitizer's count of live bytes, never tighter:
// what the fuzzer accepted replays.
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "fuzz_support.h"

namespace poseidon::fuzz {

namespace {
constexpr int64_t kThreadRoom = int64_t(4) << 30;

int64_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;  // "VmSize:  1234 kB"
  return 0;
}

void limit_address_space(rlim_t bytes) {
  rlimit limit{};
  getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? bytes : std::min(bytes, limit.rlim_max);
  setrlimit(RLIMIT_AS, &limit);
}
}  // namespace

AllocationBudget::AllocationBudget(int64_t bytes) {
  limit_address_space(static_cast<rlim_t>(address_space_bytes() + bytes + kThreadRoom));
}

AllocationBudget::~AllocationBudget() { limit_address_space(RLIM_INFINITY); }

}  // namespace poseidon::fuzz
