// Exchange: the transfer of one plan unit as a small state machine that the
// communication thread drives. start() posts the iteration's first
// non-blocking operations; complete() hears of each finished one and may post
// the next; the exchange is over when nothing of it is in flight.
// Requests is the table of everything in flight, polled with MPI_Testsome,
// and under emulated compute also the queue of the emulated device's work.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dist/device_costs.h"
#include "dist/timeline.h"

namespace poseidon::dist {

class Requests;

class Exchange {
 public:
  virtual ~Exchange() = default;
  // On the compute thread, when backward has reported all of the unit's
  // parameters: a chance to copy what the next forward would overwrite.
  virtual void capture() {}
  virtual void start(Requests& requests) = 0;
  // The operation posted with `slot` has finished.
  virtual void complete(int slot, Requests& requests) = 0;
  // What the operation posted with `slot` waits for, e.g.
  // "fc1.weight block 2 from rank 3", for stall and failure messages.
  virtual std::string describe(int slot) const = 0;

  int in_flight() const { return in_flight_; }
  // Records the solver updates on `timeline`'s update lane (null: none); set before training.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

 protected:
  // Runs `update` (a solver update), recorded as `what`.
  template <class F>
  void traced_update(const std::string& what, F&& update) {
    if (!timeline_) return update();
    const auto begin = Timeline::Clock::now();
    update();
    timeline_->add("update " + what, "update", Timeline::update, begin, Timeline::Clock::now());
  }

 private:
  friend class Requests;
  int in_flight_ = 0;
  Timeline* timeline_ = nullptr;
};

class Requests {
 public:
  // Adds a posted operation; `sent` and `received` are its payload bytes.
  void post(MPI_Request request, Exchange& owner, int slot, int64_t sent, int64_t received);
  // An operation `owner` will post later (a held send) counts as in flight
  // from now: the exchange is not over while it waits. post_held() posts it.
  void hold(Exchange& owner) { ++owner.in_flight_; }
  void post_held(MPI_Request request, Exchange& owner, int slot, int64_t sent, int64_t received);
  bool empty() const { return requests_.empty() && device_.empty() && polled_.empty(); }
  // Tests everything in flight (MPI_Testsome) and the emulated device's
  // queue, tells the owners of the finished operations, and returns the
  // exchanges left with nothing in flight.
  std::vector<Exchange*> poll();

  // Emulated compute: the device whose computation (updates, sums, SFB
  // rebuilds) the exchanges wait for instead of computing; null: they compute.
  void emulate(const DeviceCosts& costs) { emulated_ = costs; }
  const DeviceCosts* emulated() const { return emulated_ ? &*emulated_ : nullptr; }
  // Work of `seconds` on the emulated device, which runs one piece at a time
  // in the order posted; complete(slot) hears when it is over. The
  // communication thread keeps polling meanwhile, as it would beside a GPU.
  void post_device(double seconds, Exchange& owner, int slot);
  // Work of another kind (a sum on the GPU: core/gpu_allreduce.h) that
  // `landed` says, without blocking, whether it is over; complete(slot)
  // hears when it is; the owner's describe(slot) names it in stall messages.
  void post_polled(std::function<bool()> landed, Exchange& owner, int slot);
  // The longest-waiting operation, when it has waited more than `seconds`.
  const std::string* stalled(double seconds);

  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }
  // Operations finished so far (MPI and the emulated device's): a poller
  // that sees no change may wait longer before the next poll.
  int64_t finished() const { return finished_; }
  // How long until the emulated device's next piece of work is over (the
  // longest wait when it has none).
  std::chrono::steady_clock::duration until_device_done() const;

 private:
  struct Entry {
    Exchange* owner;
    int slot;
    std::chrono::steady_clock::time_point posted;
  };
  void poll_mpi(std::vector<Exchange*>& idle);
  struct DeviceWork {
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
  std::optional<DeviceCosts> emulated_;
  std::deque<DeviceWork> device_;  // in the order posted, which is the order done
  std::chrono::steady_clock::time_point device_free_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::string stall_;
  int64_t bytes_sent_ = 0, bytes_received_ = 0;
  int64_t finished_ = 0;
};

}  // namespace poseidon::dist
