// The plot verb: curves of one or more runs' metrics.jsonl in a PNG. The
// drawing is tools/plot_metrics.py (matplotlib), carried inside the binary
// so that `poseidon plot` works wherever the binary is.
#include <string>
#include <vector>

#include "plot_script.h"
#include "tools/cli/commands.h"
#include "tools/cli/python_script.h"

namespace poseidon {

int cmd_plot(const PlotArgs& args) {
  std::vector<std::string> argv = args.runs;
  if (!args.output.empty()) argv.insert(argv.end(), {"--output", args.output});
  if (!args.labels.empty()) argv.insert(argv.end(), {"--labels", args.labels});
  return run_python_script(kPlotScript, argv,
                           "poseidon plot needs python3 with matplotlib (Debian: python3-matplotlib)");
}

}  // namespace poseidon
