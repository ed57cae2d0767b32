// Runs the poseidon binary from tests and captures its exit status and
// output, plus helpers to write small inputs (YAML, IDX files) to a temp dir.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace poseidon::testing {

struct CliResult {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `poseidon <args>` (args are shell-quoted by the caller when needed).
CliResult run_poseidon(const std::string& args);

// Runs a shell command with no input, capturing its status and output.
CliResult run_captured(const std::string& command);

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

// Writes an uncompressed IDX ubyte file with the given dimensions and bytes.
void write_idx(const std::string& path, const std::vector<int32_t>& dims, const std::vector<uint8_t>& bytes);

// Writes `n` random 28x28 images and labels in [0, classes) as IDX files.
void write_idx_dataset(const std::string& images, const std::string& labels, int n, int classes, uint32_t seed);

}  // namespace poseidon::testing
