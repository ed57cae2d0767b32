// Sharded parameter server: push gradient blocks, update at the owner, pull values.
#include "dist/schemes/ps.h"

#include <algorithm>
#include <cstring>

namespace poseidon::dist {

PsExchange::PsExchange(const Comm& comm, Solver& solver, ExchangeCompute& compute, Param& param,
                       std::vector<PsBlock> blocks, PrioritySends* sends, int64_t priority, Wire wire)
    : comm_(comm),
      solver_(solver),
      compute_(compute),
      param_(param),
      blocks_(std::move(blocks)),
      sends_(sends),
      priority_(priority),
      wire_(wire) {
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].owner != comm_.rank()) {
      if (wire_ == Wire::bf16) pushed_[b].resize(blocks_[b].count);
      continue;
    }
    OwnedBlock& o = owned_[b];
    if (solver_.keeps_state()) o.state.assign(solver_.state_names().size() * blocks_[b].count, 0.f);
  }
}

int PsExchange::slot(size_t block, int peer, Kind kind) const {
  return static_cast<int>((block * comm_.size() + peer) * 3 + kind);
}

void PsExchange::start(InFlight& in_flight) {
  parity_ ^= 1;
  const int me = comm_.rank();
  float* grad = param_.grad.data();
  float* value = param_.value.data();
  // Pushes first, then the receives: a receive already posted lets Open
  // MPI's TCP transport use its put protocol, whose one large fragment holds
  // the connection's other direction (see AllreduceExchange::post_step). The
  // pulls are received into posted buffers all the same: bench/scaling.sh
  // turns that protocol off.
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const PsBlock& blk = blocks_[b];
    if (blk.owner == me) continue;
    if (wire_ == Wire::fp32) {
      send_block(in_flight, b, blk.owner, grad + blk.begin, MPI_FLOAT, blk.count * 4, false);
      continue;
    }
    std::vector<uint16_t>& out = pushed_.at(b);
    compute_.encode_wire(grad + blk.begin, out.data(), blk.count);
    send_block(in_flight, b, blk.owner, out.data(), MPI_UINT16_T, blk.count * 2, false);
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const PsBlock& blk = blocks_[b];
    const int64_t bytes = blk.count * 4;
    MPI_Request req;
    if (blk.owner == me) {
      OwnedBlock& o = owned_.at(b);
      o.pushes_left = comm_.size() - 1;
      // A buffer per pusher, or one for all where nothing reads them (an
      // emulated sum is a wait).
      const size_t buffers = static_cast<size_t>(compute_.receive_buffers(comm_.size() - 1));
      if (o.received.size() != buffers * blk.count) o.received.assign(buffers * blk.count, 0.f);
      if (wire_ == Wire::bf16 && o.received_wire.size() != buffers * blk.count)
        o.received_wire.assign(buffers * blk.count, 0);
      for (int peer = 0; peer < comm_.size(); ++peer) {
        if (peer == me) continue;
        const int64_t at = buffers > 1 ? peer_index(peer) * blk.count : 0;
        if (wire_ == Wire::bf16) {
          POSEIDON_MPI(MPI_Irecv(o.received_wire.data() + at, static_cast<int>(blk.count), MPI_UINT16_T, peer,
                                 tag(blk, false), comm_.handle(), &req));
          in_flight.post(req, *this, slot(b, peer, recv), 0, blk.count * 2);
          continue;
        }
        POSEIDON_MPI(MPI_Irecv(o.received.data() + at, static_cast<int>(blk.count), MPI_FLOAT, peer, tag(blk, false),
                               comm_.handle(), &req));
        in_flight.post(req, *this, slot(b, peer, recv), 0, bytes);
      }
      if (o.pushes_left == 0) update_owned(b, in_flight);
    } else {
      POSEIDON_MPI(MPI_Irecv(value + blk.begin, static_cast<int>(blk.count), MPI_FLOAT, blk.owner, tag(blk, true),
                             comm_.handle(), &req));
      in_flight.post(req, *this, slot(b, blk.owner, recv), 0, bytes);
    }
  }
}

void PsExchange::send_block(InFlight& in_flight, size_t b, int peer, const void* data, MPI_Datatype type, int64_t bytes,
                            bool pull) {
  const PsBlock& blk = blocks_[b];
  auto post = [this, &in_flight, b, peer, data, type, bytes, message_tag = tag(blk, pull)](bool held) {
    const PsBlock& blk = blocks_[b];
    MPI_Request req;
    POSEIDON_MPI(MPI_Isend(data, static_cast<int>(blk.count), type, peer, message_tag, comm_.handle(), &req));
    if (held)
      in_flight.post_held(req, *this, slot(b, peer, send), bytes, 0);
    else
      in_flight.post(req, *this, slot(b, peer, send), bytes, 0);
  };
  if (!sends_) return post(false);
  in_flight.hold(*this);
  sends_->submit(priority_, ps_send_sequence(b, blk.id, comm_.rank(), peer, comm_.size()), bytes,
                 [post] { post(true); });
}

void PsExchange::complete(int s, InFlight& in_flight) {
  const size_t b = static_cast<size_t>(s / 3 / comm_.size());
  if (s % 3 == updated) return send_values(b, in_flight);
  const bool was_recv = s % 3 == recv;
  if (!was_recv && sends_) {
    // A push on the bf16 wire is half a value's bytes.
    const bool push = blocks_[b].owner != comm_.rank();
    sends_->sent(blocks_[b].count * (push ? wire_bytes(wire_) : 4));
  }
  if (blocks_[b].owner == comm_.rank() && was_recv && --owned_.at(b).pushes_left == 0) update_owned(b, in_flight);
}

void PsExchange::update_owned(size_t b, InFlight& in_flight) {
  const PsBlock& blk = blocks_[b];
  OwnedBlock& o = owned_.at(b);
  const int me = comm_.rank();
  const int64_t n = blk.count;
  if (o.sum.empty()) o.sum.resize(n);
  // Rank order, whoever's push arrived first: the same sum on every run.
  const float* own = param_.grad.data() + blk.begin;
  if (wire_ == Wire::bf16) {
    compute_.decode_wire(o.received_wire.data(), o.received.data(), static_cast<int64_t>(o.received.size()));
    own = compute_.wire_rounded(own, o.own, n);
  }
  // One buffer took every push where nothing reads them (start()).
  const int64_t stride = static_cast<int64_t>(o.received.size()) > n ? n : 0;
  o.parts.resize(comm_.size());
  for (int r = 0; r < comm_.size(); ++r) o.parts[r] = r == me ? own : o.received.data() + peer_index(r) * stride;
  compute_.update_block(solver_, param_, param_.value.data() + blk.begin, o.parts, o.sum.data(),
                        o.state.empty() ? nullptr : o.state.data(), ++o.steps, n,
                        {in_flight, *this, slot(b, me, updated)});
}

void PsExchange::send_values(size_t b, InFlight& in_flight) {
  float* value = param_.value.data() + blocks_[b].begin;
  for (int peer = 0; peer < comm_.size(); ++peer)
    if (peer != comm_.rank()) send_block(in_flight, b, peer, value, MPI_FLOAT, blocks_[b].count * 4, true);
}

std::string PsExchange::describe(int s) const {
  const size_t b = static_cast<size_t>(s / 3 / comm_.size());
  const int peer = s / 3 % comm_.size();
  const PsBlock& blk = blocks_[b];
  const std::string block = param_.name + " block " + std::to_string(b);
  if (s % 3 == updated) return "the sum and update of " + block;
  if (s % 3 == send) return "rank " + std::to_string(peer) + " to receive " + block;
  if (blk.owner == comm_.rank()) return "rank " + std::to_string(peer) + "'s gradient of " + block;
  return "rank " + std::to_string(peer) + " (the server of " + block + ") to send its new values";
}

void PsExchange::import_state(const Solver& solver) {
  auto state = solver.state().find(param_.name);
  auto steps = solver.steps().find(param_.name);
  const int64_t numel = param_.value.numel();
  for (auto& [b, o] : owned_) {
    o.steps = steps == solver.steps().end() ? 0 : steps->second;
    const int64_t n = blocks_[b].count;
    for (size_t slot = 0; slot * n < o.state.size(); ++slot) {
      float* into = o.state.data() + slot * n;
      if (state == solver.state().end())
        std::fill(into, into + n, 0.f);
      else
        std::memcpy(into, state->second.data() + slot * numel + blocks_[b].begin, n * sizeof(float));
    }
  }
}

void PsExchange::gather_state(Solver& solver, int root) {
  if (!solver.keeps_state()) return;
  const int me = comm_.rank();
  const size_t slots = solver.state_names().size();
  const int64_t numel = param_.value.numel();
  float* full = nullptr;
  if (me == root) {
    Tensor t(solver.state_shape(param_.shape));
    solver.state()[param_.name] = t;
    full = t.data();
  }
  // A block's state travels packed (slot after slot), as its owner keeps it.
  std::vector<float> received;
  auto unpack = [&](const PsBlock& blk, const float* packed) {
    for (size_t slot = 0; slot < slots; ++slot)
      std::memcpy(full + slot * numel + blk.begin, packed + slot * blk.count, blk.count * sizeof(float));
  };
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const PsBlock& blk = blocks_[b];
    const int n = static_cast<int>(slots * blk.count);
    if (blk.owner == root && me == root) {
      unpack(blk, owned_.at(b).state.data());
    } else if (me == root) {
      received.resize(n);
      POSEIDON_MPI(MPI_Recv(received.data(), n, MPI_FLOAT, blk.owner, blk.id, comm_.handle(), MPI_STATUS_IGNORE));
      unpack(blk, received.data());
    } else if (blk.owner == me) {
      POSEIDON_MPI(MPI_Send(owned_.at(b).state.data(), n, MPI_FLOAT, root, blk.id, comm_.handle()));
    }
  }
  if (!solver.counts_steps()) return;
  // Every block takes a step each iteration: the first block's count is the parameter's.
  const PsBlock& first = blocks_.front();
  int64_t steps = 0;
  if (first.owner == root && me == root) {
    steps = owned_.at(0).steps;
  } else if (me == root) {
    POSEIDON_MPI(MPI_Recv(&steps, 1, MPI_INT64_T, first.owner, first.id, comm_.handle(), MPI_STATUS_IGNORE));
  } else if (first.owner == me) {
    POSEIDON_MPI(MPI_Send(&owned_.at(0).steps, 1, MPI_INT64_T, root, first.id, comm_.handle()));
  }
  if (me == root) solver.steps()[param_.name] = steps;
}

}  // namespace poseidon::dist
