// The import-torch verb: a torch.nn model as a model YAML and a safetensors
// file of its parameters. The work is tools/import_torch.py and the module
// tools/torch_graph.py (torch.fx), both carried inside the binary as
// `poseidon plot` carries its script; the script receives the module in the
// environment. Its arguments and --help are the script's own.
#include <cstdlib>
#include <string>
#include <vector>

#include "import_torch_script.h"
#include "tools/cli/commands.h"
#include "tools/cli/python_script.h"

namespace poseidon {

int cmd_import_torch(const std::vector<std::string>& args) {
  setenv("POSEIDON_TORCH_GRAPH", kTorchGraphModule, 1);
  return run_python_script(kImportTorchScript, args,
                           "poseidon import-torch needs python3 with PyTorch (Debian: python3-torch)");
}

}  // namespace poseidon
