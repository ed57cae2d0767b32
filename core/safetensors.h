// safetensors: the checkpoint file format shared with PyTorch.
//   8 bytes   little-endian uint64 N, the header length
//   N bytes   JSON: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//                    "__metadata__": {"<key>": "<string>", ...}}
//   rest      raw little-endian tensor data; offsets are relative to its start
// Reading accepts F32, F64, F16, BF16, I64 and I32 and converts to float32;
// every inconsistency is a poseidon::Error naming the file, never a crash.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace poseidon {

struct SafetensorsTensor {
  Shape shape;
  std::vector<float> data;
};

// An entry whose data read_safetensors left in the file: its shape, and
// its data read in parts when wanted, so a caller that needs a slice of a
// large entry never holds the whole. Reads go to the file as it was opened
// (the descriptor stays open while any copy lives), even if another file
// has been renamed over its path since.
class DeferredTensor {
 public:
  const Shape& shape() const { return shape_; }
  // Elements [first, first + count) in row-major order, as float32, into `out`.
  void read(int64_t first, int64_t count, float* out) const;

 private:
  friend struct DeferredTensorMaker;
  std::shared_ptr<const int> fd_;
  std::string path_, name_, dtype_;
  uint64_t offset_ = 0;  // of the entry's first byte in the file
  Shape shape_;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, SafetensorsTensor> tensors;
  // The entries `defer` chose, not read (see read_safetensors).
  std::map<std::string, DeferredTensor> deferred;
};

// Reads and checks the whole header; reads the data of every entry but those
// whose name `defer` (when given) is true for, which go to `deferred`.
SafetensorsFile read_safetensors(const std::string& path,
                                 const std::function<bool(const std::string&)>& defer = {});

// An F32 entry whose data is made while the file is written, so it need
// never be whole in memory: `produce` hands shape_numel(shape) floats, in
// row-major order, to the writer it is given, in pieces of any size.
struct StreamedTensor {
  using Writer = std::function<void(const float* data, size_t count)>;
  std::string name;
  Shape shape;
  std::function<void(const Writer& write)> produce;
};

// Writes F32 tensors, then the streamed ones, atomically: to
// "<path>.tmp.<pid>", fsync, rename over path; a crash never leaves a torn
// file at `path`. A failed write (a full disk) removes the temporary file and
// leaves `path` as it was. Every `produce` runs once, in order, even after a
// write failed (what it gives is then dropped), because a producer may be
// one side of an exchange with other processes that must run to its end.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::vector<StreamedTensor>& streamed = {});

// True for a file name of the form write_safetensors gives its temporary
// file: a process killed while writing leaves it behind.
bool is_safetensors_temporary(const std::string& file_name);

}  // namespace poseidon
