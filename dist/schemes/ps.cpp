// Sharded parameter server: push gradient blocks, update at the owner, pull values.
#include "dist/schemes/ps.h"

#include <algorithm>
#include <cstring>

#include "dist/plan/priority.h"
#include "dist/schemes/exchange_registry.h"

namespace poseidon::dist {

namespace {
std::unique_ptr<Exchange> make_ps(const ExchangeSetup& setup, const SyncGroup& group) {
  int64_t blocks = 0;
  for (const SyncGroup& g : setup.plan.groups)
    if (g.scheme == Scheme::ps) blocks += static_cast<int64_t>(g.blocks.size());
  if (PsExchange::max_tag(blocks) > setup.comm.max_tag())
    throw Error("the parameter server needs " + std::to_string(blocks) + " blocks, more than MPI's tags allow (" +
                std::to_string(setup.comm.max_tag()) + "); raise dist.block_bytes");
  const PlannedParam& p = setup.plan.params[group.params[0]];
  return std::make_unique<PsExchange>(setup.shared, setup.solver, setup.compute, *p.param, group.blocks,
                                      static_cast<int64_t>(p.layer), group.wire);
}
}  // namespace

POSEIDON_REGISTER_EXCHANGE(Scheme::ps, make_ps);

PsExchange::PsExchange(HostTransport& transport, Solver& solver, ExchangeCompute& compute, Param& param,
                       std::vector<PsBlock> blocks, int64_t priority, Wire wire)
    : transport_(transport),
      solver_(solver),
      compute_(compute),
      param_(param),
      blocks_(std::move(blocks)),
      priority_(priority),
      wire_(wire) {
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].owner != transport_.rank()) {
      if (wire_ == Wire::bf16) pushed_[b].resize(blocks_[b].count);
      continue;
    }
    OwnedBlock& o = owned_[b];
    if (solver_.keeps_state()) o.state.assign(solver_.state_names().size() * blocks_[b].count, 0.f);
  }
}

int PsExchange::slot(size_t block, int peer, Kind kind) const {
  return static_cast<int>((block * transport_.size() + peer) * 3 + kind);
}

void PsExchange::start(InFlight& in_flight) {
  parity_ ^= 1;
  // The pulls write the values; no copy rounded to bfloat16 is written
  // beside them, so the layer rounds them itself (core/rounded_weight.h).
  param_.rounded.current = false;
  const int me = transport_.rank();
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
    const HostTransport::Order push_order = order(b, blk.owner);
    if (wire_ == Wire::fp32) {
      transport_.send(in_flight, grad + blk.begin, blk.count, blk.owner, tag(blk, false), *this,
                      slot(b, blk.owner, send), &push_order);
      continue;
    }
    std::vector<uint16_t>& out = pushed_.at(b);
    compute_.encode_wire(grad + blk.begin, out.data(), blk.count);
    transport_.send(in_flight, out.data(), blk.count, blk.owner, tag(blk, false), *this, slot(b, blk.owner, send),
                    &push_order);
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const PsBlock& blk = blocks_[b];
    if (blk.owner == me) {
      OwnedBlock& o = owned_.at(b);
      o.pushes_left = transport_.size() - 1;
      // A buffer per pusher, or one for all where nothing reads them (an
      // emulated sum is a wait).
      const size_t buffers = static_cast<size_t>(compute_.receive_buffers(transport_.size() - 1));
      if (o.received.size() != buffers * blk.count) o.received.assign(buffers * blk.count, 0.f);
      if (wire_ == Wire::bf16 && o.received_wire.size() != buffers * blk.count)
        o.received_wire.assign(buffers * blk.count, 0);
      for (int peer = 0; peer < transport_.size(); ++peer) {
        if (peer == me) continue;
        const int64_t at = buffers > 1 ? peer_index(peer) * blk.count : 0;
        if (wire_ == Wire::bf16)
          transport_.receive(in_flight, o.received_wire.data() + at, blk.count, peer, tag(blk, false), *this,
                             slot(b, peer, recv));
        else
          transport_.receive(in_flight, o.received.data() + at, blk.count, peer, tag(blk, false), *this,
                             slot(b, peer, recv));
      }
      if (o.pushes_left == 0) update_owned(b, in_flight);
    } else {
      transport_.receive(in_flight, value + blk.begin, blk.count, blk.owner, tag(blk, true), *this,
                         slot(b, blk.owner, recv));
    }
  }
}

HostTransport::Order PsExchange::order(size_t b, int peer) const {
  return {priority_, ps_send_sequence(b, blocks_[b].id, transport_.rank(), peer, transport_.size())};
}

void PsExchange::complete(int s, InFlight& in_flight) {
  const size_t b = static_cast<size_t>(s / 3 / transport_.size());
  if (s % 3 == updated) return send_values(b, in_flight);
  if (blocks_[b].owner == transport_.rank() && s % 3 == recv && --owned_.at(b).pushes_left == 0)
    update_owned(b, in_flight);
}

void PsExchange::update_owned(size_t b, InFlight& in_flight) {
  const PsBlock& blk = blocks_[b];
  OwnedBlock& o = owned_.at(b);
  const int me = transport_.rank();
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
  o.parts.resize(transport_.size());
  for (int r = 0; r < transport_.size(); ++r) o.parts[r] = r == me ? own : o.received.data() + peer_index(r) * stride;
  compute_.update_block(solver_, param_, param_.value.data() + blk.begin, o.parts, o.sum.data(),
                        o.state.empty() ? nullptr : o.state.data(), ++o.steps, n,
                        {in_flight, *this, slot(b, me, updated)});
}

void PsExchange::send_values(size_t b, InFlight& in_flight) {
  const PsBlock& blk = blocks_[b];
  const float* value = param_.value.data() + blk.begin;
  for (int peer = 0; peer < transport_.size(); ++peer) {
    if (peer == transport_.rank()) continue;
    const HostTransport::Order value_order = order(b, peer);
    transport_.send(in_flight, value, blk.count, peer, tag(blk, true), *this, slot(b, peer, send), &value_order);
  }
}

std::string PsExchange::describe(int s) const {
  const size_t b = static_cast<size_t>(s / 3 / transport_.size());
  const int peer = s / 3 % transport_.size();
  const PsBlock& blk = blocks_[b];
  const std::string block = param_.name + " block " + std::to_string(b);
  if (s % 3 == updated) return "the sum and update of " + block;
  if (s % 3 == send) return "rank " + std::to_string(peer) + " to receive " + block;
  if (blk.owner == transport_.rank()) return "rank " + std::to_string(peer) + "'s gradient of " + block;
  return "rank " + std::to_string(peer) + " (the server of " + block + ") to send its new values";
}

void PsExchange::restore(Solver& solver, const std::map<std::string, DeferredTensor>&) {
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
  solver.drop_state(param_.name);
}

void PsExchange::gather_solver_state(Solver& solver, int root) {
  if (!solver.keeps_state()) return;
  const int me = transport_.rank();
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
      transport_.receive_now(received.data(), n, blk.owner, static_cast<int>(blk.id));
      unpack(blk, received.data());
    } else if (blk.owner == me) {
      transport_.send_now(owned_.at(b).state.data(), n, root, static_cast<int>(blk.id));
    }
  }
  if (!solver.counts_steps()) return;
  // Every block takes a step each iteration: the first block's count is the parameter's.
  const PsBlock& first = blocks_.front();
  int64_t steps = 0;
  if (first.owner == root && me == root) {
    steps = owned_.at(0).steps;
  } else if (me == root) {
    transport_.receive_now(&steps, 1, first.owner, static_cast<int>(first.id));
  } else if (first.owner == me) {
    transport_.send_now(&owned_.at(0).steps, 1, root, static_cast<int>(first.id));
  }
  if (me == root) solver.steps()[param_.name] = steps;
}

}  // namespace poseidon::dist
