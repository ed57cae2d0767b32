// Scratch files and inputs of the fuzz targets (the allocation budget is in
// sanitizer_budget.cpp for libFuzzer runs, address_space_budget.cpp for the
// corpus replay of the normal build).
#include "fuzz_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace poseidon::fuzz {

namespace {
struct ScratchDir {
  std::string path;
  ScratchDir() {
    path = (std::filesystem::temp_directory_path() / ("poseidon-fuzz-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace

const std::string& scratch_dir() {
  static ScratchDir dir;
  return dir.path;
}

std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) std::abort();  // the harness itself failed, not the code under test
  return path;
}

std::string write_file(const std::string& name, const std::string& text) {
  return write_file(name, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

std::string input_path(const std::string& name) { return std::string(POSEIDON_FUZZ_INPUTS) + "/" + name; }

}  // namespace poseidon::fuzz
