// Stopping training on a signal: the first SIGTERM or SIGINT asks the
// training loop to stop at the next iteration boundary (it writes a
// checkpoint and exits 0; in an MPI job every rank stops together:
// dist/stop_vote.h); a second one ends the process at once. The request lives
// in a process-wide flag because a signal handler can reach nothing else.
#pragma once

namespace poseidon {

// Installs the handlers (training only: the other verbs keep the defaults).
void catch_stop_signals();
// The signal that asked to stop (SIGTERM, SIGINT), or 0.
int stop_signal();
// "SIGTERM", "SIGINT".
const char* stop_signal_name(int signal);

}  // namespace poseidon
