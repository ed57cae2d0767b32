// Fuzz target: a model file, from YAML text to a built Net: vars and block
// expansion, layer construction and key checks, the graph (producers, cycles,
// topological order), shape inference and the flat parameter buffers.
#include <new>

#include "core/net.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size > fuzz::kMaxInputBytes) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::accept_or_reject([&] {
    ConfigNode model = ConfigNode::parse(text, "model.yaml");
    fuzz::AllocationBudget budget(int64_t(128) << 20);
    try {
      Net net(model, 2);
    } catch (const std::bad_alloc&) {
      // A model too large for the budget; the CLI reports "out of memory".
    }
  });
  return 0;
}
