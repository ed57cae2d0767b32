// HostTransport: moves host memory between the ranks of one communicator
// with MPI. An exchange (dist/schemes) says what goes from which rank to
// which; the transport posts the non-blocking MPI call and enters it in the
// InFlight table, whose poll tells the exchange (complete(slot)) when it is
// over. No exchange makes an MPI call of its own.
//
// A transport given a send queue (dist.order: priority, dist/plan/priority.h)
// holds the sends that name an order and lets them out, lowest layer first,
// as its window allows: pump() posts them, and a finished one frees its
// bytes of the window. Receives are never held.
//
// The blocking calls serve the collectives run between iterations
// (checkpoints), on the communication thread.
#pragma once

#include <cstdint>
#include <memory>

#include "dist/plan/priority.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/exchange.h"

namespace poseidon::dist {

class HostTransport {
 public:
  // Where a held send queues: its layer, then its sequence within the layer.
  struct Order {
    int64_t priority = 0, sequence = 0;
  };

  // Moves over `comm`, which must outlive the transport. With
  // `queue_window_bytes` > 0, sends given an Order wait in a queue of that window.
  explicit HostTransport(const Comm& comm, int64_t queue_window_bytes = 0);

  const Comm& comm() const { return comm_; }
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  // Sends `count` numbers at `data` (left untouched until the send is over)
  // to rank `peer` with `tag`; owner.complete(slot) hears when it is over.
  // With an `order` and a queue the send waits there first.
  void send(InFlight& in_flight, const float* data, int64_t count, int peer, int tag, Exchange& owner, int slot,
            const Order* order = nullptr);
  void send(InFlight& in_flight, const uint16_t* data, int64_t count, int peer, int tag, Exchange& owner, int slot,
            const Order* order = nullptr);
  // Receives `count` numbers from rank `peer` with `tag` into `into`.
  void receive(InFlight& in_flight, float* into, int64_t count, int peer, int tag, Exchange& owner, int slot);
  void receive(InFlight& in_flight, uint16_t* into, int64_t count, int peer, int tag, Exchange& owner, int slot);
  // Every rank's `count` floats at `mine` into `all`, in rank order.
  void all_gather(InFlight& in_flight, const float* mine, int64_t count, float* all, Exchange& owner, int slot);
  // Posts the held sends the window lets out (none without a queue).
  void pump();

  // Blocking, between iterations.
  void send_now(const float* data, int64_t count, int peer, int tag) const;
  void send_now(const int64_t* data, int64_t count, int peer, int tag) const;
  void receive_now(float* into, int64_t count, int peer, int tag) const;
  void receive_now(int64_t* into, int64_t count, int peer, int tag) const;

 private:
  void post_send(InFlight& in_flight, const void* data, int64_t count, MPI_Datatype type, int64_t bytes, int peer,
                 int tag, Exchange& owner, int slot, const Order* order);
  void post_receive(InFlight& in_flight, void* into, int64_t count, MPI_Datatype type, int64_t bytes, int peer,
                    int tag, Exchange& owner, int slot);

  const Comm& comm_;
  std::unique_ptr<PrioritySends> queue_;
};

}  // namespace poseidon::dist
