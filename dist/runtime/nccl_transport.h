// NcclTransport: the DeviceTransport of a GPU net, NCCL's sums of its flat
// gradients on the GPUs (dist/gpu/gpu_allreduce.h), polled through InFlight.
// connect() is collective: the ranks compare their GPUs and share NCCL's id
// over MPI.
#pragma once

#include <memory>

#include "core/net.h"
#include "dist/gpu/gpu_allreduce.h"
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

 private:
  Net& gpu_net_;
  GpuAllReduce all_reduce_;
};

}  // namespace poseidon::dist
