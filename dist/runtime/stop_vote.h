// StopVote: all ranks of a job agree, at the same iteration boundary, to stop
// when any one of them was asked to (a SIGTERM or SIGINT to one rank, as a
// scheduler's preemption sends it). At every boundary each rank adds its wish
// to a vote (a non-blocking MPI_Iallreduce of the maximum on a communicator
// of its own) and reads the outcome of the vote it added at the boundary
// before, which has long arrived: a wish made during iteration i stops every
// rank after iteration i + 1, together, and the vote never waits on the
// iteration's own transfers. Called by the compute thread; this needs MPI's
// MPI_THREAD_MULTIPLE, since the communication thread makes its own calls
// meanwhile (dist::Session votes otherwise).
#pragma once

#include <mpi.h>

#include <functional>

#include "dist/runtime/comm.h"

namespace poseidon::dist {

class StopVote {
 public:
  explicit StopVote(const World& world);
  ~StopVote();
  StopVote(const StopVote&) = delete;
  StopVote& operator=(const StopVote&) = delete;

  // At an iteration boundary, the same number of calls on every rank:
  // adds `mine` to this boundary's vote and returns whether the previous
  // boundary's vote asked to stop. While that vote is still out (a rank
  // stopped or behind) `check` is called between polls: it throws to end
  // the wait, e.g. when the communication thread has found a stall.
  bool vote(bool mine, const std::function<void()>& check);

 private:
  Comm comm_;
  MPI_Request pending_ = MPI_REQUEST_NULL;
  int wish_ = 0, outcome_ = 0;
};

}  // namespace poseidon::dist
