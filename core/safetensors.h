// safetensors: the checkpoint file format shared with PyTorch.
//   8 bytes   little-endian uint64 N, the header length
//   N bytes   JSON: {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//                    "__metadata__": {"<key>": "<string>", ...}}
//   rest      raw little-endian tensor data; offsets are relative to its start
// Reading accepts F32, F64, F16, BF16, I64 and I32 and converts to float32;
// every inconsistency is a poseidon::Error naming the file, never a crash.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace poseidon {

struct SafetensorsTensor {
  Shape shape;
  std::vector<float> data;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, SafetensorsTensor> tensors;
};

SafetensorsFile read_safetensors(const std::string& path);

// Writes F32 tensors atomically: to "<path>.tmp.<pid>", fsync, rename over
// path; a crash never leaves a torn file at `path`. A failed write (a full
// disk) removes the temporary file and leaves `path` as it was.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       const std::map<std::string, std::string>& metadata);

// True for a file name of the form write_safetensors gives its temporary
// file: a process killed while writing leaves it behind.
bool is_safetensors_temporary(const std::string& file_name);

}  // namespace poseidon
