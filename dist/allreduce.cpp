// Bucket all-reduce as reduce-scatter + all-gather, then the Solver update.
#include "dist/allreduce.h"

#include <limits>

namespace poseidon::dist {

AllreduceExchange::AllreduceExchange(const Comm& comm, Solver& solver, std::vector<Param*> params, float* grads,
                                     int64_t count, std::string label)
    : comm_(comm), solver_(solver), params_(std::move(params)), grads_(grads), count_(count), label_(std::move(label)) {
  const int p = comm_.size();
  if (count_ > std::numeric_limits<int>::max())
    throw CommError("all-reduce bucket of " + label_ + " has " + std::to_string(count_) +
                    " elements, more than one MPI call can move; use scheme ps for it");
  counts_.resize(p);
  displs_.resize(p);
  int64_t at = 0;
  for (int r = 0; r < p; ++r) {
    counts_[r] = static_cast<int>(count_ / p + (r < count_ % p ? 1 : 0));
    displs_[r] = static_cast<int>(at);
    at += counts_[r];
  }
  chunk_.resize(std::max(1, counts_[comm_.rank()]));
}

void AllreduceExchange::start(Requests& requests) {
  MPI_Request req;
  POSEIDON_MPI(MPI_Ireduce_scatter(grads_, chunk_.data(), counts_.data(), MPI_FLOAT, MPI_SUM, comm_.handle(), &req));
  const int64_t mine = counts_[comm_.rank()];
  // Nominal bytes of a ring: every chunk but one's own leaves and arrives once.
  const int64_t moved = (count_ - mine) * 4;
  requests.post(req, *this, reduce_scatter, moved, moved);
}

void AllreduceExchange::complete(int slot, Requests& requests) {
  if (slot == reduce_scatter) {
    const float scale = 1.f / static_cast<float>(comm_.size());
    const int n = counts_[comm_.rank()];
    for (int i = 0; i < n; ++i) chunk_[i] *= scale;
    MPI_Request req;
    POSEIDON_MPI(MPI_Iallgatherv(chunk_.data(), n, MPI_FLOAT, grads_, counts_.data(), displs_.data(), MPI_FLOAT,
                                 comm_.handle(), &req));
    const int64_t moved = (count_ - n) * 4;
    requests.post(req, *this, all_gather, moved, moved);
    return;
  }
  for (Param* p : params_) solver_.update(*p);
}

std::string AllreduceExchange::describe(int slot) const {
  return std::string(slot == reduce_scatter ? "the reduce-scatter" : "the all-gather") + " of " + label_ +
         " (a collective: a rank that never joins it stalls every other)";
}

}  // namespace poseidon::dist
