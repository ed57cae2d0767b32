// AllreduceExchange: one bucket of the flat gradient buffer (several small
// parameters fused, or one large one) averaged over all ranks by a ring, then
// applied by the Solver on every rank.
//
// The bucket is cut into P chunks. In 2(P - 1) steps each rank sends one
// chunk to its right neighbour and receives one from its left (nonblocking
// point-to-point, so the communication thread keeps driving other units):
// the first P - 1 steps reduce-scatter (each received chunk is added into the
// rank's own, so that after them rank r holds the sum of chunk r + 1, which
// the last step also averages), the next P - 1 all-gather the averaged chunks
// around the ring. Every rank moves 2 (P - 1) / P of the bucket each way,
// the least any all-reduce can, and each chunk's sum is computed once, by
// one rank, in one order: every rank then holds the very same numbers, so
// replicas stay bitwise identical.
//
// Each bucket has its own communicator and every step its own tag; a step
// starts when the previous one is over. The sums and the update run on
// `compute` (dist/exchange_compute.h). With a `device_sum` (a GPU
// net's buckets summed by NCCL on the GPUs: core/gpu_allreduce.h) the ring is
// not run: the sum lands in the bucket's host range, which is then averaged
// and applied, the same bits on every rank.
//
// On the bf16 wire (dist/wire.h) every step sends its chunk rounded to bf16
// and the receiver adds the widened numbers in fp32; the rank that completes
// a chunk's average rounds it to bf16 too before the all-gather, so it keeps
// the very numbers every other rank receives. (A bf16 bucket is never
// given a device sum.)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/comm.h"
#include "dist/exchange.h"
#include "dist/exchange_compute.h"
#include "dist/wire.h"

namespace poseidon::dist {

// Starts summing a bucket over the ranks elsewhere into its host range
// (`grads`, `count` floats) and returns a test of whether it has landed.
using DeviceSum = std::function<std::function<bool()>(float* grads, int64_t count)>;

class AllreduceExchange : public Exchange {
 public:
  // `grads` is the bucket's range of the flat gradient buffer (`count`
  // floats, padding included); `params` are the parameters inside it.
  AllreduceExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params, float* grads,
                    int64_t count, std::string label, DeviceSum device_sum = {}, Wire wire = Wire::fp32);
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

 private:
  // Slots: per step, its receive and its send; then the computation's and the device sum's.
  enum Kind { received = 0, sent = 1 };
  static constexpr int kSummed = -1, kUpdated = -2, kDeviceSummed = -3;

  int steps() const { return 2 * (comm_.size() - 1); }
  int chunk_sent(int step) const;      // the chunk this rank sends at `step`
  int chunk_received(int step) const;  // the chunk it receives
  void post_step(InFlight& in_flight);
  void step_over(InFlight& in_flight);  // both transfers of step_ are done
  void next_step(InFlight& in_flight);
  void update(InFlight& in_flight);

  Comm comm_;
  Solver& solver_;
  ExchangeCompute& compute_;
  std::vector<Param*> params_;
  float* grads_;
  int64_t count_;
  std::string label_;
  DeviceSum device_sum_;
  std::vector<int64_t> begins_, counts_;  // per chunk
  std::vector<float> incoming_;           // a chunk received in the reduce-scatter
  int step_ = 0;
  int step_pending_ = 0;  // transfers of step_ not yet done

  // The bf16 wire: a step's chunk as sent and as received.
  Wire wire_;
  std::vector<uint16_t> wire_out_, wire_in_;
};

}  // namespace poseidon::dist
