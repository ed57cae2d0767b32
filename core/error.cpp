// Formatting of error locations, shared by every user-facing error message.
#include "core/error.h"

namespace poseidon {

std::string SourceLocation::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line > 0) {
    s.append(":").append(std::to_string(line));
    if (column > 0) s.append(":").append(std::to_string(column));
  }
  if (!key.empty()) s.append(": key '").append(key).append("'");
  return s;
}

ConfigError::ConfigError(SourceLocation where, const std::string& what)
    : Error(where.str() + ": " + what), where_(std::move(where)) {}

}  // namespace poseidon
