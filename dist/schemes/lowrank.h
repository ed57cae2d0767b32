// LowRankExchange: one layer's gradient compressed to rank r with error
// feedback (PowerSGD: Vogels, Karimireddy and Jaggi, NeurIPS 2019). The
// layer's weight reads as an n x m matrix (rows: its first dimension). Each
// iteration, on every rank:
//   M  = gradient + error memory
//   P  = sum over ranks of M Q            (n x r; Q is the last iteration's, warm start)
//   P  = P with orthonormal columns       (Gram-Schmidt)
//   Q  = mean over ranks of M^T P         (m x r)
//   gradient = P Q^T,  error memory = M - P Q^T
// then the Solver update. The layer's other parameters (a bias) travel
// uncompressed beside P and are averaged. Sums over ranks are gathers
// (MPI_Iallgather) summed on every rank in rank order, so every rank holds
// the same P, Q and gradient: replicas stay bitwise identical. The error
// memory differs per rank (it is what that rank's own gradient lost).
// The arithmetic is in the free functions below, which a single-process
// simulation of the same exchange calls in the same order.
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
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

// The rank-r factor state of one layer: Q (m x r, the same on every rank)
// and this rank's error memory (n x m).
struct LowRankState {
  int64_t rows = 0, cols = 0;
  int rank = 0;
  std::vector<float> q, error;
};

// The starting state of a weight of `rows` x `cols` at rank `rank`: zero
// error, Q drawn from a normal distribution seeded by the parameter's name
// (the same on every rank).
LowRankState initial_lowrank_state(const std::string& name, int64_t rows, int64_t cols, int rank);

// Step 1: m = grad + error; p = m q (rows x rank).
void lowrank_project(LowRankState& s, const float* grad, float* m, float* p);
// Orthonormalises the `rank` columns of p (rows x rank, row-major) in place,
// in column order (modified Gram-Schmidt; a column of norm 0 stays 0).
void orthogonalise_columns(float* p, int64_t rows, int rank);
// Step 2, after p is summed and orthogonalised: q_local = m^T p (cols x rank).
void lowrank_back_project(const LowRankState& s, const float* m, const float* p, float* q_local);
// Step 3, with s.q the mean of the q_local: grad = p q^T, error = m - grad.
void lowrank_decompress(LowRankState& s, const float* m, const float* p, float* grad);
// out = sum over `parts` (n floats each, summed in the order given) times scale.
void sum_in_order(const std::vector<const float*>& parts, int64_t n, float scale, float* out);

class LowRankExchange : public Exchange {
 public:
  // `params`: the layer's learnable parameters, the weight first.
  LowRankExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params, int rank,
                  std::string label);
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

  // Checkpointed state: "compression.<weight>.lowrank_q" [cols, r] and
  // "compression.<weight>.lowrank_error" [ranks, rows, cols], every rank's
  // error memory in rank order.
  std::string q_name() const;
  std::string error_name() const;
  Shape error_shape() const;
  // Q as an entry written from this rank's copy (the same on every rank).
  StreamedTensor q_entry() const;
  // Takes Q and this rank's slice of the error memory from `saved` where it
  // holds them (a resumed run), reading no other rank's; throws Error when
  // their shapes do not fit this layer, rank and rank count.
  void import_state(const std::map<std::string, DeferredTensor>& saved);
  // Collective over this exchange's communicator, outside iterations: rank
  // `root` hands every rank's error memory, in rank order, to `write` (an
  // empty one drops it), receiving one piece at a time; the others send theirs.
  void stream_error(int root, const StreamedTensor::Writer& write);

 private:
  enum Slot { projected, gathered_p, back_projected, gathered_q, decompressed, updated };

  Comm comm_;
  Solver& solver_;
  ExchangeCompute& compute_;
  std::vector<Param*> params_;
  std::string label_;
  LowRankState state_;
  int64_t others_ = 0;                  // numbers of the other parameters
  std::vector<float> m_, p_;            // M, and the summed P
  std::vector<float> send_, gathered_;  // a gather's contribution and result (P and the others; or Q)
};

}  // namespace poseidon::dist
