// The signal handlers behind stop_signal.h.
#include "tools/cli/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace poseidon {

namespace {
std::atomic<int> requested{0};

void on_signal(int signal) {
  int none = 0;
  if (requested.compare_exchange_strong(none, signal)) return;
  // The second signal: stop now, as the default action would.
  _exit(128 + signal);
}
}  // namespace

void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stop_signal() { return requested.load(); }

const char* stop_signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace poseidon
