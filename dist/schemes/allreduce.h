// AllreduceExchange: one bucket of the flat gradient buffer (several small
// parameters fused, or one large one) averaged over all ranks, then applied
// by the Solver on every rank.
//
// The bucket follows this rank's steps of the plan's algorithm
// (dist/schemes/allreduce_schedule.h: ring, halving-doubling or two-level): in each
// step it sends a range to one rank and receives one from another
// (nonblocking point-to-point, so the communication thread keeps driving
// other groups), then adds what it received into its own range or keeps it in
// place. The ring moves 2 (P - 1) / P of the bucket each way, the least any
// all-reduce can; halving-doubling the same in 2 log2 P steps when P is a
// power of two. Each element's sum is computed once, by one rank, in one
// order: every rank then holds the very same numbers, so replicas stay
// bitwise identical.
//
// Each bucket has its own communicator and HostTransport
// (dist/runtime/host_transport.h) and every step its own tag; a step starts
// when the previous one is over. The sums and the update run on `compute`
// (dist/schemes/exchange_compute.h). With `device_sums` (a GPU net's buckets
// summed by NCCL on the GPUs: dist/runtime/nccl_transport.h) the steps are
// not run: the sum of the bucket's range lands in its host range, which is
// then averaged and applied, the same bits on every rank.
//
// On the bf16 wire (dist/plan/wire.h) every step sends its chunk rounded to bf16
// and the receiver adds the widened numbers in fp32; the rank that completes
// a chunk's average rounds it to bf16 too before the all-gather, so it keeps
// the very numbers every other rank receives. (A bf16 bucket of a net
// staged through a host mirror is never given a device sum.)
//
// A bucket of a net exchanged on its GPU, without a host mirror, is a
// DeviceAllreduceExchange instead (dist/schemes/device_allreduce.h): the
// factory registered here picks it by the net's device.
#pragma once

#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/plan/wire.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/device_transport.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/host_transport.h"
#include "dist/schemes/allreduce_schedule.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

class AllreduceExchange : public Exchange {
 public:
  // `grads` is the bucket's range of the flat gradient buffer (`count`
  // floats, padding included, from element `begin`); `params` are the
  // parameters inside it; `per_host`: consecutive ranks per host, for two_level.
  AllreduceExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params,
                    float* grads, int64_t begin, int64_t count, std::string label,
                    DeviceTransport* device_sums = nullptr, Wire wire = Wire::fp32,
                    AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring, int per_host = 1);
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

 private:
  // Slots: per step, its receive and its send; then the computation's and the device sum's.
  enum Kind { received = 0, sent = 1 };
  static constexpr int kSummed = -1, kUpdated = -2, kDeviceSummed = -3;

  int steps() const { return static_cast<int>(schedule_.size()); }
  void post_step(InFlight& in_flight);
  void step_over(InFlight& in_flight);  // both transfers of step_ are done
  void next_step(InFlight& in_flight);
  void update(InFlight& in_flight);

  Comm comm_;
  HostTransport transport_;  // over comm_
  Solver& solver_;
  ExchangeCompute& compute_;
  std::vector<Param*> params_;
  float* grads_;
  int64_t begin_, count_;
  std::string label_;
  DeviceTransport* device_sums_;
  AllreduceAlgorithm algorithm_;
  std::vector<ScheduleStep> schedule_;  // this rank's steps
  std::vector<float> incoming_;         // a range received to be added
  int step_ = 0;
  int step_pending_ = 0;  // transfers of step_ not yet done

  // The bf16 wire: a step's chunk as sent and as received.
  Wire wire_;
  std::vector<uint16_t> wire_out_, wire_in_;
};

}  // namespace poseidon::dist
