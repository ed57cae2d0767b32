// The stop vote of a job's ranks (see stop_vote.h).
#include "dist/stop_vote.h"

namespace poseidon::dist {

StopVote::StopVote(const World& world) : comm_(world) {
  POSEIDON_CHECK(world.thread_level() >= MPI_THREAD_MULTIPLE) << "the stop vote needs MPI_THREAD_MULTIPLE";
}

StopVote::~StopVote() {
  // A vote still out when the job ends is finished, not abandoned: every
  // rank added to it at the same boundary, so it completes.
  if (pending_ != MPI_REQUEST_NULL) MPI_Wait(&pending_, MPI_STATUS_IGNORE);
}

bool StopVote::vote(bool mine) {
  bool stop = false;
  if (pending_ != MPI_REQUEST_NULL) {
    POSEIDON_MPI(MPI_Wait(&pending_, MPI_STATUS_IGNORE));
    stop = outcome_ != 0;
  }
  wish_ = mine ? 1 : 0;
  POSEIDON_MPI(MPI_Iallreduce(&wish_, &outcome_, 1, MPI_INT, MPI_MAX, comm_.handle(), &pending_));
  return stop;
}

}  // namespace poseidon::dist
