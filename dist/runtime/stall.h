// StallInspector: names the rank a stalled transfer waits for. When a rank's
// transfer makes no progress for dist.timeout_s, its communication thread asks
// every other rank how far it is (iterations handed over by backward) over a
// communicator of its own. Communication threads answer such questions
// whenever they poll, so a rank that does not answer within a grace period is
// stopped, hung or dead, and one that answers with fewer iterations is behind
// (its compute thread is stuck or slow). Used on the communication thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "dist/runtime/comm.h"

namespace poseidon::dist {

class StallInspector {
 public:
  explicit StallInspector(const Comm& parent);
  ~StallInspector();
  StallInspector(const StallInspector&) = delete;
  StallInspector& operator=(const StallInspector&) = delete;

  // Answers the questions that have arrived: this rank has handed over
  // `progress` iterations.
  void answer(int64_t progress);
  // Asks every other rank, answering others meanwhile, for at most `grace`
  // seconds. Returns e.g. "rank 1 does not answer (stopped, hung or dead)" or
  // "rank 2 is behind (2 iterations handed over, this rank 5)", or an empty
  // string when every rank answered and none is behind.
  std::string inspect(int64_t progress, double grace);

 private:
  void post_question_receive();
  // Sends without ever blocking: a stopped rank's queue may be full.
  void send(int64_t value, int to, int tag);

  Comm comm_;
  MPI_Request question_ = MPI_REQUEST_NULL;
  int64_t question_buf_ = 0;
  std::deque<std::pair<int64_t, MPI_Request>> sends_;  // values in flight, each with its send
};

}  // namespace poseidon::dist
