// The plot verb: curves of one or more runs' metrics.jsonl in a PNG. The
// drawing is tools/plot_metrics.py (matplotlib), carried inside the binary
// so that `poseidon plot` works wherever the binary is. It runs under Debian's
// /usr/bin/python3 (where python3-matplotlib installs), else the python3 on PATH.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "plot_script.h"
#include "tools/cli/commands.h"

namespace poseidon {

int cmd_plot(const PlotArgs& args) {
  const std::string python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> argv = {python, "-c", kPlotScript};
  argv.insert(argv.end(), args.runs.begin(), args.runs.end());
  if (!args.output.empty()) argv.insert(argv.end(), {"--output", args.output});
  if (!args.labels.empty()) argv.insert(argv.end(), {"--labels", args.labels});
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) throw Error("poseidon plot: cannot start python3");
  if (child == 0) {
    execvp(raw[0], raw.data());
    std::fprintf(stderr, "error: poseidon plot needs python3 with matplotlib (Debian: python3-matplotlib)\n");
    _exit(2);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace poseidon
