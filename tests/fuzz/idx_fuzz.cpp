// Fuzz target: IDX files (plain or gzipped) as an IdxSource reads them: both
// headers, payload sizes, the images/labels agreement, and every example.
// Input layout: a 2-byte little-endian length L, L bytes of labels file, and
// the rest is the images file.
#include <algorithm>
#include <vector>

#include "data/idx_source.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  if (size < 2 || size > fuzz::kMaxInputBytes) return 0;
  const size_t label_bytes = std::min<size_t>(size - 2, data[0] | (data[1] << 8));
  const std::string labels = fuzz::write_file("labels.idx", data + 2, label_bytes);
  const std::string images = fuzz::write_file("images.idx", data + 2 + label_bytes, size - 2 - label_bytes);
  fuzz::accept_or_reject([&] {
    IdxSource source(images, labels, 1.f / 255.f, 0.25f, 0.5f, 0);
    std::vector<float> example(static_cast<size_t>(shape_numel(source.sample_shape())));
    for (int64_t i = 0; i < source.size(); ++i) {
      int64_t label = source.read(i, example.data(), 0);
      if (label < 0 || label >= source.num_classes()) __builtin_trap();
    }
  });
  return 0;
}
