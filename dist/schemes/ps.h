// PsExchange: one parameter through the sharded parameter server. The
// parameter is cut into blocks, each owned by one rank (every rank is a
// server). Each rank pushes its gradient block to the owner (MPI_Isend); the
// owner sums the P gradients in rank order, averages them, runs the Solver's
// update on its block (so it alone keeps that block's optimizer state, such
// as momentum or Adam's moments and step count: the state is sharded) and
// sends the new values to every other rank. Message tags are (block id,
// iteration parity, push or pull). The owner's sum and update run on
// `compute` (dist/schemes/exchange_compute.h); the blocks move through the
// run's shared HostTransport (dist/runtime/host_transport.h), whose queue
// orders the sends under dist.order: priority (each send names its layer
// and its ps_send_sequence).
//
// On the bf16 wire (dist/plan/wire.h) the pushes travel as bf16; the owner widens
// them and rounds its own gradient the same way, so the sum is of what every
// rank sent, in rank order and in fp32. Values travel as fp32.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/plan/plan.h"
#include "dist/plan/wire.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/host_transport.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

class PsExchange : public Exchange {
 public:
  // Pushes and value sends name `priority` (the parameter's layer index)
  // for the transport's queue, where it has one.
  PsExchange(HostTransport& transport, Solver& solver, ExchangeCompute& compute, Param& param,
             std::vector<PsBlock> blocks, int64_t priority = 0, Wire wire = Wire::fp32);
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

  // Optimizer state of the blocks this rank owns, taken from the solver's
  // full state of the parameter (a restored checkpoint; absent state starts
  // at zero, an absent step count at 0), which the solver then drops: only
  // the owners keep it.
  void restore(Solver& solver, const std::map<std::string, DeferredTensor>& saved) override;
  // Collective, outside iterations: rank `root` assembles the parameter's
  // full state (and step count) into `solver` (other ranks send their blocks).
  void gather_solver_state(Solver& solver, int root) override;

  // The largest tag a plan with `blocks` block ids uses.
  static int64_t max_tag(int64_t blocks) { return blocks * 4 - 1; }

 private:
  struct OwnedBlock {
    // Allocated at first use: (P - 1) gradient blocks by peer order (one
    // when the compute reads none of them), and their sum.
    std::vector<float> received;
    std::vector<float> sum;
    std::vector<const float*> parts;  // the P gradients in rank order
    std::vector<float> state;         // the solver's slots, `count` floats each; empty without state
    std::vector<uint16_t> received_wire;  // bf16: the pushes as received
    std::vector<float> own;               // bf16: this rank's gradient as the wire rounds it
    int64_t steps = 0;                // updates applied
    int pushes_left = 0;
  };
  enum Kind { recv = 0, send = 1, updated = 2 };  // updated: the owner's sum and update
  int slot(size_t block, int peer, Kind kind) const;
  int tag(const PsBlock& b, bool pull) const { return (b.id * 2 + parity_) * 2 + (pull ? 1 : 0); }
  int peer_index(int peer) const { return peer < transport_.rank() ? peer : peer - 1; }  // into `received`
  void update_owned(size_t block, InFlight& in_flight);
  void send_values(size_t block, InFlight& in_flight);
  // Where block `b`'s send to `peer` queues under dist.order: priority.
  HostTransport::Order order(size_t b, int peer) const;

  HostTransport& transport_;
  Solver& solver_;
  ExchangeCompute& compute_;
  Param& param_;
  std::vector<PsBlock> blocks_;
  std::map<size_t, OwnedBlock> owned_;  // by index into blocks_
  int parity_ = 1;                      // flipped by every start()
  int64_t priority_;
  Wire wire_;
  std::map<size_t, std::vector<uint16_t>> pushed_;  // bf16: the pushes of blocks others own, as sent
};

}  // namespace poseidon::dist
