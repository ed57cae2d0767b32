// CLI dispatch (filled in with the verbs).
#include "tools/cli/app.h"

namespace poseidon {
int run_cli(int, char**) { return 0; }
}  // namespace poseidon
