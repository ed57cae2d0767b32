// Runs a Python script carried inside the binary (`poseidon plot`,
// `poseidon import-torch`) under Debian's /usr/bin/python3, where the
// python3-* packages install, else the python3 on PATH.
#pragma once

#include <string>
#include <vector>

namespace poseidon {

// Runs `script` with `args` and returns its exit status; `missing` is printed
// when no python3 can be started (what the verb needs, and its package).
int run_python_script(const char* script, const std::vector<std::string>& args, const std::string& missing);

}  // namespace poseidon
