// Fuzz target: `--set key=value` overrides, one per input line (at most 8),
// applied by TrainConfig::load to tests/fuzz/inputs/tiny_config.yaml and,
// prefixed "net.", to its model (vars and blocks included); the Net is then
// built from the overridden model.
#include <new>
#include <sstream>

#include "core/net.h"
#include "fuzz_support.h"
#include "tools/cli/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size > fuzz::kMaxInputBytes) return 0;
  std::vector<std::string> overrides;
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; overrides.size() < 8 && std::getline(lines, line);) overrides.push_back(line);
  fuzz::accept_or_reject([&] {
    TrainConfig config = TrainConfig::load(fuzz::input_path("tiny_config.yaml"), overrides);
    fuzz::AllocationBudget budget(int64_t(128) << 20);
    try {
      Net net(config.model, 2);
    } catch (const std::bad_alloc&) {
      // A model too large for the budget; the CLI reports "out of memory".
    }
  });
  return 0;
}
