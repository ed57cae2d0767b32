// Starts python3 on a script held in memory and waits for it.
#include "tools/cli/python_script.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "core/error.h"

namespace poseidon {

int run_python_script(const char* script, const std::vector<std::string>& args, const std::string& missing) {
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv = {python, "-c", script};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) throw Error("cannot start python3: " + missing);
  if (child == 0) {
    execvp(raw[0], raw.data());
    std::fprintf(stderr, "error: %s\n", missing.c_str());
    _exit(2);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace poseidon
