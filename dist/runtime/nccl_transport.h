// NcclTransport: the DeviceTransport of a GPU net, NCCL's sums and means of
// its flat gradients on the GPUs (dist/gpu/gpu_allreduce.h), polled through
// InFlight; the bf16 wire's slices of one GPU buffer laid out by
// DeviceWireSlices (dist/plan/device_staging.h). connect() is collective:
// the ranks compare their GPUs and share NCCL's id over MPI.
#pragma once

#include <memory>

#include "core/net.h"
#include "dist/gpu/gpu_allreduce.h"
#include "dist/plan/device_staging.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/device_transport.h"

namespace poseidon::dist {

class NcclTransport : public DeviceTransport {
 public:
  // Collective over `world`, for `gpu_net` (on a GPU): null where two ranks
  // share a GPU (NCCL takes one per rank; they keep the MPI ring).
  static std::unique_ptr<NcclTransport> connect(const World& world, Net& gpu_net);

  NcclTransport(Net& gpu_net, const std::vector<char>& id, int ranks, int rank);
  void sum_to_host(InFlight& in_flight, int64_t begin, int64_t count, float* host, Exchange& owner,
                   int slot) override;
  void gradients_queued() override { all_reduce_.mark_gradients_queued(); }
  int64_t reserve_wire(int64_t count) override { return wire_slices_.reserve(count); }
  void mean_on_device(InFlight& in_flight, int64_t begin, int64_t count, Wire wire, int64_t wire_slot, Exchange& owner,
                      int slot) override;

 private:
  Net& gpu_net_;
  GpuAllReduce all_reduce_;
  DeviceWireSlices wire_slices_;
};

}  // namespace poseidon::dist
