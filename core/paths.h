// Checks on paths the user names, so that a directory given where a file is
// expected (or a file where a directory is) is reported as such rather than
// as an empty or unreadable input.
#pragma once

#include <string>

namespace poseidon {

// "" when `path` is a regular file (or a link to one); otherwise why not:
// "not found", "is a directory, not a file", ...
std::string why_not_a_file(const std::string& path);

// Creates the directory `path` (and its parents) unless it exists; "" on
// success, otherwise why it cannot be used: a file is in the way, no
// permission, ...
std::string make_directory(const std::string& path);

}  // namespace poseidon
