// MPI's non-blocking point-to-point calls and all-gather on host memory, and the held sends' queue.
#include "dist/runtime/host_transport.h"

namespace poseidon::dist {

HostTransport::HostTransport(const Comm& comm, int64_t queue_window_bytes) : comm_(comm) {
  if (queue_window_bytes > 0) queue_ = std::make_unique<PrioritySends>(queue_window_bytes);
}

void HostTransport::send(InFlight& in_flight, const float* data, int64_t count, int peer, int tag, Exchange& owner,
                         int slot, const Order* order) {
  post_send(in_flight, data, count, MPI_FLOAT, count * 4, peer, tag, owner, slot, order);
}

void HostTransport::send(InFlight& in_flight, const uint16_t* data, int64_t count, int peer, int tag,
                         Exchange& owner, int slot, const Order* order) {
  post_send(in_flight, data, count, MPI_UINT16_T, count * 2, peer, tag, owner, slot, order);
}

void HostTransport::receive(InFlight& in_flight, float* into, int64_t count, int peer, int tag, Exchange& owner,
                            int slot) {
  post_receive(in_flight, into, count, MPI_FLOAT, count * 4, peer, tag, owner, slot);
}

void HostTransport::receive(InFlight& in_flight, uint16_t* into, int64_t count, int peer, int tag, Exchange& owner,
                            int slot) {
  post_receive(in_flight, into, count, MPI_UINT16_T, count * 2, peer, tag, owner, slot);
}

void HostTransport::post_send(InFlight& in_flight, const void* data, int64_t count, MPI_Datatype type,
                              int64_t bytes, int peer, int tag, Exchange& owner, int slot, const Order* order) {
  if (!queue_ || !order) {
    MPI_Request req;
    POSEIDON_MPI(MPI_Isend(data, static_cast<int>(count), type, peer, tag, comm_.handle(), &req));
    in_flight.post(req, owner, slot, bytes, 0);
    return;
  }
  // Counted as in flight from now: the exchange is not over while its send waits.
  in_flight.hold(owner);
  PrioritySends* queue = queue_.get();
  queue->submit(order->priority, order->sequence, bytes, [this, &in_flight, data, count, type, bytes, peer, tag,
                                                          &owner, slot, queue] {
    MPI_Request req;
    POSEIDON_MPI(MPI_Isend(data, static_cast<int>(count), type, peer, tag, comm_.handle(), &req));
    in_flight.post_held(req, owner, slot, bytes, 0, [queue, bytes] { queue->sent(bytes); });
  });
}

void HostTransport::post_receive(InFlight& in_flight, void* into, int64_t count, MPI_Datatype type, int64_t bytes,
                                 int peer, int tag, Exchange& owner, int slot) {
  MPI_Request req;
  POSEIDON_MPI(MPI_Irecv(into, static_cast<int>(count), type, peer, tag, comm_.handle(), &req));
  in_flight.post(req, owner, slot, 0, bytes);
}

void HostTransport::all_gather(InFlight& in_flight, const float* mine, int64_t count, float* all, Exchange& owner,
                               int slot) {
  const int64_t others = comm_.size() - 1;
  MPI_Request req;
  POSEIDON_MPI(MPI_Iallgather(mine, static_cast<int>(count), MPI_FLOAT, all, static_cast<int>(count), MPI_FLOAT,
                              comm_.handle(), &req));
  in_flight.post(req, owner, slot, others * count * 4, others * count * 4);
}

void HostTransport::pump() {
  if (!queue_) return;
  while (std::function<void()> post = queue_->release()) post();
}

void HostTransport::send_now(const float* data, int64_t count, int peer, int tag) const {
  POSEIDON_MPI(MPI_Send(data, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_.handle()));
}

void HostTransport::send_now(const int64_t* data, int64_t count, int peer, int tag) const {
  POSEIDON_MPI(MPI_Send(data, static_cast<int>(count), MPI_INT64_T, peer, tag, comm_.handle()));
}

void HostTransport::receive_now(float* into, int64_t count, int peer, int tag) const {
  POSEIDON_MPI(MPI_Recv(into, static_cast<int>(count), MPI_FLOAT, peer, tag, comm_.handle(), MPI_STATUS_IGNORE));
}

void HostTransport::receive_now(int64_t* into, int64_t count, int peer, int tag) const {
  POSEIDON_MPI(MPI_Recv(into, static_cast<int>(count), MPI_INT64_T, peer, tag, comm_.handle(), MPI_STATUS_IGNORE));
}

}  // namespace poseidon::dist
