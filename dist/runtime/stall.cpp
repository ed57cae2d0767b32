// Asking the other ranks how far they are, and answering them.
#include "dist/runtime/stall.h"

#include <chrono>
#include <thread>
#include <vector>

namespace poseidon::dist {

namespace {
constexpr int kQuestionTag = 1;
constexpr int kAnswerTag = 2;
}  // namespace

StallInspector::StallInspector(const Comm& parent) : comm_(parent.duplicate()) { post_question_receive(); }

StallInspector::~StallInspector() {
  // Sends to a rank that is gone never complete: they are abandoned, not awaited.
  for (auto& [value, req] : sends_)
    if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
  if (question_ == MPI_REQUEST_NULL) return;
  MPI_Cancel(&question_);
  MPI_Wait(&question_, MPI_STATUS_IGNORE);
}

void StallInspector::post_question_receive() {
  POSEIDON_MPI(MPI_Irecv(&question_buf_, 1, MPI_INT64_T, MPI_ANY_SOURCE, kQuestionTag, comm_.handle(), &question_));
}

void StallInspector::send(int64_t value, int to, int tag) {
  while (!sends_.empty()) {
    int done = 0;
    POSEIDON_MPI(MPI_Test(&sends_.front().second, &done, MPI_STATUS_IGNORE));
    if (!done) break;
    sends_.pop_front();
  }
  sends_.emplace_back(value, MPI_REQUEST_NULL);
  POSEIDON_MPI(MPI_Isend(&sends_.back().first, 1, MPI_INT64_T, to, tag, comm_.handle(), &sends_.back().second));
}

void StallInspector::answer(int64_t progress) {
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    POSEIDON_MPI(MPI_Test(&question_, &arrived, &status));
    if (!arrived) return;
    send(progress, status.MPI_SOURCE, kAnswerTag);
    post_question_receive();
  }
}

std::string StallInspector::inspect(int64_t progress, double grace) {
  const int me = comm_.rank(), n = comm_.size();
  std::vector<int64_t> answers(n, -1);
  std::vector<MPI_Request> pending(n, MPI_REQUEST_NULL);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    POSEIDON_MPI(MPI_Irecv(&answers[r], 1, MPI_INT64_T, r, kAnswerTag, comm_.handle(), &pending[r]));
    send(me, r, kQuestionTag);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  for (;;) {
    answer(progress);
    // One by one: MPI_Testall would leave every request active until all are done.
    bool all = true;
    for (MPI_Request& req : pending) {
      int done = 1;
      if (req != MPI_REQUEST_NULL) POSEIDON_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      all = all && done;
    }
    if (all || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string silent, behind;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    if (pending[r] != MPI_REQUEST_NULL) {
      MPI_Cancel(&pending[r]);
      MPI_Request_free(&pending[r]);
      if (!silent.empty()) silent += ", ";
      silent += "rank " + std::to_string(r);
    } else if (answers[r] < progress) {
      if (!behind.empty()) behind += "; ";
      behind += "rank " + std::to_string(r) + " is behind (" + std::to_string(answers[r]) +
                " iterations handed over, this rank " + std::to_string(progress) + ")";
    }
  }
  std::string out;
  if (!silent.empty())
    out = silent + (silent.find(',') == std::string::npos ? " does" : " do") + " not answer (stopped, hung or dead)";
  if (!out.empty() && !behind.empty()) out += "; ";
  return out + behind;
}

}  // namespace poseidon::dist
