// File and directory checks with messages for users.
#include "core/paths.h"

#include <unistd.h>

#include <filesystem>

namespace poseidon {

namespace fs = std::filesystem;

std::string why_not_a_file(const std::string& path) {
  std::error_code ec;  // an unusable path (too long, ...) is "not found", not an exception
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) return "not found";
  if (fs::is_directory(status)) return "is a directory, not a file";
  if (!fs::is_regular_file(status)) return "is not a regular file";
  return "";
}

std::string make_directory(const std::string& path) {
  std::error_code ec;
  // The deepest existing folder on the way: a file there explains ENOTDIR.
  fs::path existing = fs::path(path).lexically_normal();
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (!existing.empty() && fs::exists(existing, ec) && !fs::is_directory(existing, ec))
    return "'" + existing.string() + "' is a file, not a directory";
  fs::create_directories(path, ec);
  if (ec) return "cannot create the directory: " + ec.message();
  if (::access(path.c_str(), W_OK | X_OK) != 0) return "the directory is not writable";
  return "";
}

}  // namespace poseidon
