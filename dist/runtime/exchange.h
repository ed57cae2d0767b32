// Exchange: the transfer of one plan group as a small state machine that the
// communication thread drives. start() posts the iteration's first
// non-blocking operations; complete() hears of each finished one and may post
// the next; the exchange is over when nothing of it is in flight.
// InFlight is the table of everything in flight: MPI operations (polled with
// MPI_Testsome), work whose end is polled (a sum on a GPU), and work whose end
// is known in advance (an emulated device's: dist/schemes/emulated_compute.h).
// The transports post into it: dist/runtime/host_transport.h (MPI on host
// memory) and dist/runtime/device_transport.h (sums on the GPUs' memory).
// What an exchange keeps across iterations (a checkpoint's part of it) it
// restores and hands out through its own virtuals, so the scheduler keeps
// no list of exchanges by scheme.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/events.h"
#include "core/safetensors.h"
#include "core/solver.h"

namespace poseidon::dist {

class InFlight;

// A tensor of an exchange's own state that a checkpoint holds besides the
// net and the solver (low-rank compression's Q and error memories).
// write(root, writer) hands it to rank `root`'s writer. A `collective` one
// is written by every rank at once, on the communication thread, each with
// its part (the other ranks' writers are empty); otherwise root alone writes
// it from its own copy.
struct ExchangeStateEntry {
  std::string name;
  Shape shape;
  bool collective = false;
  std::function<void(int root, const StreamedTensor::Writer& write)> write;
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  // On the compute thread, when backward has reported all of the group's
  // parameters: copies the operands the exchange reads later that the next
  // forward would overwrite (SFB's factors).
  virtual void snapshot_operands() {}
  virtual void start(InFlight& in_flight) = 0;
  // The operation posted with `slot` has finished.
  virtual void complete(int slot, InFlight& in_flight) = 0;
  // What the operation posted with `slot` waits for, e.g.
  // "fc1.weight block 2 from rank 3", for stall and failure messages.
  virtual std::string describe(int slot) const = 0;

  // Where `param`'s gradient comes from when the exchange forms it itself
  // (SFB: from its layer's input and output gradient, GradSink::gradient_sources);
  // null when backward computes it.
  virtual const std::vector<BlobPart>* gradient_sources(const Param&) const { return nullptr; }
  // Once, before the first iteration: takes the exchange's state from a
  // restored `solver` and the checkpoint's other entries (`saved`); may move
  // state out of the solver (a PS owner keeps its blocks' own).
  virtual void restore(Solver& /*solver*/, const std::map<std::string, DeferredTensor>& /*saved*/) {}
  // Collective, outside iterations: rank `root` assembles into `solver` the
  // solver state this exchange keeps (PS blocks' owners send theirs).
  virtual void gather_solver_state(Solver& /*solver*/, int /*root*/) {}
  // The checkpoint entries of the exchange's own state, the same list on every rank.
  virtual std::vector<ExchangeStateEntry> state_entries() { return {}; }

  int operations_in_flight() const { return in_flight_; }

 private:
  friend class InFlight;
  int in_flight_ = 0;
};

class InFlight {
 public:
  // Adds a posted operation; `sent` and `received` are its payload bytes;
  // `on_done` (if any) runs when it finishes, before owner.complete(slot).
  void post(MPI_Request request, Exchange& owner, int slot, int64_t sent, int64_t received,
            std::function<void()> on_done = {});
  // An operation `owner` will post later (a held send) counts as in flight
  // from now: the exchange is not over while it waits. post_held() posts it.
  void hold(Exchange& owner) { ++owner.in_flight_; }
  void post_held(MPI_Request request, Exchange& owner, int slot, int64_t sent, int64_t received,
                 std::function<void()> on_done = {});
  bool empty() const { return requests_.empty() && timed_.empty() && polled_.empty(); }
  // Tests everything in flight (MPI_Testsome, the polled and the timed
  // work), tells the owners of the finished operations, and returns the
  // exchanges left with nothing in flight.
  std::vector<Exchange*> poll();

  // Work that is over at `done`; complete(slot) hears when it is. Posted in
  // the order of their ends (one device runs one piece at a time).
  void post_timed(std::chrono::steady_clock::time_point done, Exchange& owner, int slot);
  // Work of another kind (a sum on the GPU: dist/gpu/gpu_allreduce.h) that
  // `landed` says, without blocking, whether it is over; complete(slot)
  // hears when it is; the owner's describe(slot) names it in stall messages.
  void post_polled(std::function<bool()> landed, Exchange& owner, int slot);
  // The longest-waiting operation, when it has waited more than `seconds`.
  const std::string* stalled(double seconds);

  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }
  // Operations finished so far (of every kind): a poller that sees no change
  // may wait longer before the next poll.
  int64_t finished() const { return finished_; }
  // How long until the next timed work is over (the longest wait when none is).
  std::chrono::steady_clock::duration until_timed_done() const;

 private:
  struct Entry {
    Exchange* owner;
    int slot;
    std::chrono::steady_clock::time_point posted;
    std::function<void()> on_done;
  };
  void poll_mpi(std::vector<Exchange*>& idle);
  struct TimedWork {
    std::chrono::steady_clock::time_point done;
    Exchange* owner;
    int slot;
  };
  struct Polled {
    std::function<bool()> landed;
    Entry entry;
  };
  void poll_polled(std::vector<Exchange*>& idle);
  std::vector<MPI_Request> requests_;
  std::vector<Entry> entries_;
  std::vector<Polled> polled_;  // in the order posted
  std::deque<TimedWork> timed_;  // in the order posted, which is the order done
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::string stall_;
  int64_t bytes_sent_ = 0, bytes_received_ = 0;
  int64_t finished_ = 0;
};

}  // namespace poseidon::dist
