// The table of operations in flight: MPI requests, polled work and timed work.
#include "dist/runtime/exchange.h"

#include <algorithm>

#include "dist/runtime/comm.h"

namespace poseidon::dist {

void InFlight::post(MPI_Request request, Exchange& owner, int slot, int64_t sent, int64_t received,
                    std::function<void()> on_done) {
  requests_.push_back(request);
  entries_.push_back(Entry{&owner, slot, std::chrono::steady_clock::now(), std::move(on_done)});
  ++owner.in_flight_;
  bytes_sent_ += sent;
  bytes_received_ += received;
}

void InFlight::post_held(MPI_Request request, Exchange& owner, int slot, int64_t sent, int64_t received,
                         std::function<void()> on_done) {
  post(request, owner, slot, sent, received, std::move(on_done));
  --owner.in_flight_;  // counted since hold()
}

void InFlight::post_timed(std::chrono::steady_clock::time_point done, Exchange& owner, int slot) {
  timed_.push_back(TimedWork{done, &owner, slot});
  ++owner.in_flight_;
}

void InFlight::post_polled(std::function<bool()> landed, Exchange& owner, int slot) {
  polled_.push_back(Polled{std::move(landed), Entry{&owner, slot, std::chrono::steady_clock::now(), {}}});
  ++owner.in_flight_;
}

void InFlight::poll_polled(std::vector<Exchange*>& idle) {
  for (size_t i = 0; i < polled_.size();) {
    if (!polled_[i].landed()) {
      ++i;
      continue;
    }
    const Entry e = std::move(polled_[i].entry);
    polled_.erase(polled_.begin() + static_cast<std::ptrdiff_t>(i));
    --e.owner->in_flight_;
    ++finished_;
    e.owner->complete(e.slot, *this);
    if (e.owner->in_flight_ == 0) idle.push_back(e.owner);
  }
}

std::vector<Exchange*> InFlight::poll() {
  std::vector<Exchange*> idle;
  poll_mpi(idle);
  poll_polled(idle);
  const auto now = std::chrono::steady_clock::now();
  while (!timed_.empty() && timed_.front().done <= now) {
    const TimedWork w = timed_.front();
    timed_.pop_front();
    --w.owner->in_flight_;
    ++finished_;
    w.owner->complete(w.slot, *this);
    if (w.owner->in_flight_ == 0) idle.push_back(w.owner);
  }
  return idle;
}

void InFlight::poll_mpi(std::vector<Exchange*>& idle) {
  if (requests_.empty()) return;
  const int n = static_cast<int>(requests_.size());
  indices_.resize(n);
  statuses_.resize(n);
  int done = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &done, indices_.data(), statuses_.data());
  if (rc != MPI_SUCCESS) {
    int code = rc;
    std::string what = "an operation in flight";
    if (rc == MPI_ERR_IN_STATUS)
      for (int k = 0; k < done; ++k)
        if (statuses_[k].MPI_ERROR != MPI_SUCCESS) {
          code = statuses_[k].MPI_ERROR;
          what = entries_[indices_[k]].owner->describe(entries_[indices_[k]].slot);
          break;
        }
    throw CommError("MPI_Testsome failed: " + mpi_error_string(code) + " (waiting for " + what + ")");
  }
  if (done == MPI_UNDEFINED || done == 0) return;
  std::vector<Entry> finished;
  finished.reserve(done);
  for (int k = 0; k < done; ++k) finished.push_back(std::move(entries_[indices_[k]]));
  // Testsome set the finished requests to MPI_REQUEST_NULL: drop them, keeping the order of the rest.
  size_t kept = 0;
  for (size_t i = 0; i < requests_.size(); ++i)
    if (requests_[i] != MPI_REQUEST_NULL) {
      requests_[kept] = requests_[i];
      if (kept != i) entries_[kept] = std::move(entries_[i]);
      ++kept;
    }
  requests_.resize(kept);
  entries_.resize(kept);
  finished_ += done;
  for (const Entry& e : finished) {
    if (e.on_done) e.on_done();
    --e.owner->in_flight_;
    e.owner->complete(e.slot, *this);
    if (e.owner->in_flight_ == 0) idle.push_back(e.owner);
  }
}

std::chrono::steady_clock::duration InFlight::until_timed_done() const {
  if (timed_.empty()) return std::chrono::steady_clock::duration::max();
  return std::max(timed_.front().done - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero());
}

const std::string* InFlight::stalled(double seconds) {
  const Entry* oldest = nullptr;
  for (const Entry& e : entries_)
    if (!oldest || e.posted < oldest->posted) oldest = &e;
  for (const Polled& p : polled_)
    if (!oldest || p.entry.posted < oldest->posted) oldest = &p.entry;
  if (!oldest) return nullptr;
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - oldest->posted).count();
  if (waited <= seconds) return nullptr;
  stall_ = oldest->owner->describe(oldest->slot);
  return &stall_;
}

}  // namespace poseidon::dist
