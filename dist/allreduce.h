// AllreduceExchange: one bucket of the flat gradient buffer (several small
// parameters fused, or one large one) averaged over all ranks, then applied
// by the Solver on every rank.
//
// Replicas must stay bitwise identical, and an MPI all-reduce does not promise
// the same bits on every rank (its algorithm may sum in another order on
// each). So the bucket is reduced in two collectives: a reduce-scatter (each
// rank receives the sum of one chunk, computed once) and an all-gather of the
// averaged chunks. Every rank then holds the very same numbers.
//
// Each bucket has its own communicator: non-blocking collectives on one
// communicator must be issued in the same order on every rank, and a bucket's
// all-gather follows its reduce-scatter whenever that completes, which
// differs between ranks. Alone on its communicator, a bucket's two
// collectives always come in the same order.
#pragma once

#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/comm.h"
#include "dist/exchange.h"

namespace poseidon::dist {

class AllreduceExchange : public Exchange {
 public:
  // `grads` is the bucket's range of the flat gradient buffer (`count`
  // floats, padding included); `params` are the parameters inside it.
  AllreduceExchange(const Comm& comm, Solver& solver, std::vector<Param*> params, float* grads, int64_t count,
                    std::string label);
  void start(Requests& requests) override;
  void complete(int slot, Requests& requests) override;
  std::string describe(int slot) const override;

 private:
  enum Slot { reduce_scatter = 0, all_gather = 1 };

  Comm comm_;
  Solver& solver_;
  std::vector<Param*> params_;
  float* grads_;
  int64_t count_;
  std::string label_;
  std::vector<int> counts_, displs_;  // the chunk of each rank
  std::vector<float> chunk_;          // this rank's summed chunk
};

}  // namespace poseidon::dist
