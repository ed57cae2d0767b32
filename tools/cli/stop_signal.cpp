// The signal thread and handler behind stop_signal.h.
#include "tools/cli/stop_signal.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

namespace poseidon {

namespace {
std::atomic<int> requested{0};

// The first signal asks to stop; the second stops now, as the default
// action would. Safe in a handler: an atomic and _exit.
void take(int signal) {
  int none = 0;
  if (requested.compare_exchange_strong(none, signal)) return;
  _exit(128 + signal);
}

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}
}  // namespace

void catch_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    for (;;) {
      int signal = 0;
      if (sigwait(&set, &signal) == 0) take(signal);
    }
  }).detach();
  struct sigaction action {};
  action.sa_handler = take;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int stop_signal() { return requested.load(); }

const char* stop_signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace poseidon
