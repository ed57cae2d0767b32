// Fuzz target: the list file of an image_list source ("relative/path label"
// per line), through read_image_list. The images are not opened.
#include "data/image_source.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size > fuzz::kMaxInputBytes) return 0;
  const std::string path = fuzz::write_file("list.txt", data, size);
  fuzz::accept_or_reject([&] {
    for (const ImageEntry& e : read_image_list(path, "/images", "data.train.list"))
      if (e.label < 0 || e.path.empty()) __builtin_trap();
  });
  return 0;
}
