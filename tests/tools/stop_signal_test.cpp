// The stop signals (tools/cli/stop_signal.h) are taken by a thread of their
// own: the thread that asked for them and every thread it starts afterwards
// keep them blocked, so no handler frame is ever written on a computing
// thread's stack. The first signal asks to stop, the second ends the process
// with 128 plus its number. The case runs in a child process: the signals'
// state is process-wide and stays.
#include "tools/cli/stop_signal.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

namespace poseidon {
namespace {

bool blocks_stop_signals() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGTERM) == 1 && sigismember(&mask, SIGINT) == 1;
}

bool waits_for_stop_request(int signal) {
  for (int i = 0; i < 500 && stop_signal() != signal; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return stop_signal() == signal;
}

// The child's checks, in order; a failed one exits with its number.
[[noreturn]] void first_asks_second_ends() {
  if (stop_signal() != 0) _exit(1);
  catch_stop_signals();
  if (!blocks_stop_signals()) _exit(2);
  bool started_blocks = false;
  std::thread([&] { started_blocks = blocks_stop_signals(); }).join();
  if (!started_blocks) _exit(3);
  kill(getpid(), SIGTERM);
  if (!waits_for_stop_request(SIGTERM)) _exit(4);
  kill(getpid(), SIGINT);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  _exit(5);  // the second signal did not end the process
}

}  // namespace

TEST(StopSignal, ComputingThreadsNeverTakeThemTheFirstAsksTheSecondEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(first_asks_second_ends(), ::testing::ExitedWithCode(128 + SIGINT), "");
}

}  // namespace poseidon
