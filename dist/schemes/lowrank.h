// LowRankExchange: one layer's gradient compressed to rank r with error
// feedback (PowerSGD: Vogels, Karimireddy and Jaggi, NeurIPS 2019). The
// layer's weight reads as an n x m matrix (rows: its first dimension). Each
// iteration, on every rank:
//   M  = gradient + error memory
//   P  = mean over ranks of M Q           (n x r; Q is the last iteration's, warm start)
//   P  = P with orthonormal columns       (Gram-Schmidt)
//   Q  = mean over ranks of M^T P         (m x r)
//   gradient = P Q^T,  error memory = M - P Q^T
// M is formed in the error memory's own buffer, which holds M from the
// projection to the decompression: a layer costs one n x m buffer beside
// its gradient, and the factors' (n + m) r.
// then the Solver update. The layer's other parameters (a bias) travel
// uncompressed beside P and are averaged. The sums over ranks are ring
// all-reduces (dist/schemes/allreduce_schedule.h: a reduce-scatter and an
// all-gather over point-to-point messages, each chunk summed by one rank in
// one order), which average: P's scale does not matter to its
// orthonormalised columns. A rank moves 2 (P - 1) / P of the factors each
// way, whatever P, and every rank holds the same P, Q and gradient: replicas
// stay bitwise identical. The error memory differs per rank (it is what that
// rank's own gradient lost).
// The arithmetic is in the free functions below, which a single-process
// simulation of the same exchange calls in the same order. The factors move
// on the layer's own communicator (dist/runtime/host_transport.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/layer.h"
#include "core/safetensors.h"
#include "core/solver.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/host_transport.h"
#include "dist/schemes/allreduce_schedule.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

// The rank-r factor state of one layer: Q (m x r, the same on every rank)
// and this rank's error memory (n x m), which holds M = gradient + error
// memory between lowrank_project and lowrank_decompress.
struct LowRankState {
  int64_t rows = 0, cols = 0;
  int rank = 0;
  std::vector<float> q, error;
};

// The starting state of a weight of `rows` x `cols` at rank `rank`: zero
// error, Q drawn from a normal distribution seeded by the parameter's name
// (the same on every rank).
LowRankState initial_lowrank_state(const std::string& name, int64_t rows, int64_t cols, int rank);

// Step 1: error = M = grad + error, in place; p = M q (rows x rank).
void lowrank_project(LowRankState& s, const float* grad, float* p);
// Orthonormalises the `rank` columns of p (rows x rank, row-major) in place,
// in column order (modified Gram-Schmidt; a column of norm 0 stays 0).
void orthogonalise_columns(float* p, int64_t rows, int rank);
// Step 2, after p is summed and orthogonalised: q_local = M^T p (cols x rank),
// M in s.error.
void lowrank_back_project(const LowRankState& s, const float* p, float* q_local);
// Step 3, with s.q the mean of the q_local: grad = p q^T, error = M - grad,
// in place.
void lowrank_decompress(LowRankState& s, const float* p, float* grad);

class LowRankExchange : public Exchange {
 public:
  // `params`: the layer's learnable parameters, the weight first.
  // `algorithm` and `per_host`: how its sums run (dist/schemes/allreduce_schedule.h).
  LowRankExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params, int rank,
                  std::string label, AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring, int per_host = 1);
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

  // Checkpointed state: "compression.<weight>.lowrank_q" [cols, r] and
  // "compression.<weight>.lowrank_error" [ranks, rows, cols], every rank's
  // error memory in rank order (streamed: stream_error).
  std::string q_name() const;
  std::string error_name() const;
  Shape error_shape() const;
  std::vector<ExchangeStateEntry> state_entries() override;
  // Q as an entry written from this rank's copy (the same on every rank).
  StreamedTensor q_entry() const;
  // Takes Q and this rank's slice of the error memory from `saved` where it
  // holds them (a resumed run), reading no other rank's; throws Error when
  // their shapes do not fit this layer, rank and rank count.
  void restore(Solver& solver, const std::map<std::string, DeferredTensor>& saved) override;
  // Collective over this exchange's communicator, outside iterations: rank
  // `root` hands every rank's error memory, in rank order, to `write` (an
  // empty one drops it), receiving one piece at a time; the others send theirs.
  void stream_error(int root, const StreamedTensor::Writer& write);

 private:
  // Slots of the arithmetic; a step's transfers take kSteps + 2 * step (+ 1 for its send).
  enum Slot { projected, reduced_p, back_projected, reduced_q, decompressed, updated, summed };
  static constexpr int kSteps = 16;

  // The ring all-reduce (the mean) of `count` floats at `data`, which calls
  // complete(`then`) when every rank holds the result.
  void allreduce(float* data, int64_t count, int then, InFlight& in_flight);
  void post_step(InFlight& in_flight);
  void step_over(InFlight& in_flight);

  Comm comm_;
  HostTransport transport_;  // over comm_
  Solver& solver_;
  ExchangeCompute& compute_;
  std::vector<Param*> params_;
  std::string label_;
  AllreduceAlgorithm algorithm_;
  int per_host_;
  LowRankState state_;
  int64_t others_ = 0;                  // numbers of the other parameters
  std::vector<float> p_;                // the summed P
  std::vector<float> send_;             // P and the others, or Q, as this rank computed them, then their mean
  // The all-reduce under way: its buffer, this rank's steps, a chunk received to be added.
  float* reduced_ = nullptr;
  int then_ = 0, step_ = 0, step_pending_ = 0;
  std::vector<ScheduleStep> schedule_;
  std::vector<float> incoming_;
};

}  // namespace poseidon::dist
