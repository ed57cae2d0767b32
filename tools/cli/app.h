// The poseidon command line: a verb table (train, test, time, summary, layers)
// over the engine. main() only forwards to run_cli so tests can call verbs
// in-process.
#pragma once

namespace poseidon {

// Runs the CLI; returns the process exit status (0 ok, 2 bad input, 1 failure).
int run_cli(int argc, char** argv);

}  // namespace poseidon
