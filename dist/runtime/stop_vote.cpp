// The stop vote of a job's ranks (see stop_vote.h).
#include "dist/runtime/stop_vote.h"

#include <chrono>
#include <exception>
#include <thread>

namespace poseidon::dist {

StopVote::StopVote(const World& world) : comm_(world) {
  POSEIDON_CHECK(world.thread_level() >= MPI_THREAD_MULTIPLE) << "the stop vote needs MPI_THREAD_MULTIPLE";
}

StopVote::~StopVote() {
  // A vote still out when the job ends normally is finished: every rank
  // added to it at the same boundary. After a failure it may never finish
  // (a rank is gone), and the job is ending anyway: it is abandoned.
  if (pending_ != MPI_REQUEST_NULL && !std::uncaught_exceptions()) MPI_Wait(&pending_, MPI_STATUS_IGNORE);
}

bool StopVote::vote(bool mine, const std::function<void()>& check) {
  bool stop = false;
  if (pending_ != MPI_REQUEST_NULL) {
    for (int done = 0;;) {
      POSEIDON_MPI(MPI_Test(&pending_, &done, MPI_STATUS_IGNORE));
      if (done) break;
      check();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    stop = outcome_ != 0;
  }
  wish_ = mine ? 1 : 0;
  POSEIDON_MPI(MPI_Iallreduce(&wish_, &outcome_, 1, MPI_INT, MPI_MAX, comm_.handle(), &pending_));
  return stop;
}

}  // namespace poseidon::dist
