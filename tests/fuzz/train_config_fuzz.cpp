// Fuzz target: a training config file, through TrainConfig::load (every
// section's keys, the model file it names) and, for synthetic data, the
// source it describes. Other sources would open files the input names.
#include <filesystem>

#include "data/source.h"
#include "fuzz_support.h"
#include "tools/cli/train_config.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::filesystem::copy_file(poseidon::fuzz::input_path("tiny_model.yaml"),
                             poseidon::fuzz::scratch_dir() + "/model.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size > fuzz::kMaxInputBytes) return 0;
  const std::string path = fuzz::write_file("config.yaml", data, size);
  fuzz::accept_or_reject([&] {
    TrainConfig config = TrainConfig::load(path, {});
    std::vector<const DataConfig*> sets = {&config.train_data};
    if (config.test_data) sets.push_back(&*config.test_data);
    for (const DataConfig* d : sets)
      if (d->node.get_string("source", "idx") == "synthetic") make_source(d->node, config.base_dir);
  });
  return 0;
}
