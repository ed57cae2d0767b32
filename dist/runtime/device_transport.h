// DeviceTransport: sums a range of the flat gradient buffer over the ranks
// where the gradients were computed, on their devices, and lands the sum in
// the host's copy of that range; dist/runtime/nccl_transport.h moves it with
// NCCL on the GPUs' memory. An all-reduce bucket of a GPU net (dist/schemes/
// allreduce.h) names its range; the transport knows where it lies on the
// device, so no exchange handles a device pointer.
#pragma once

#include <cstdint>

#include "dist/runtime/exchange.h"

namespace poseidon::dist {

class DeviceTransport {
 public:
  virtual ~DeviceTransport() = default;
  // Starts summing elements [begin, begin + count) of the device net's flat
  // gradients over the ranks; the sum lands in `host` (count floats) and
  // owner.complete(slot) hears when it has. Every rank starts its sums in
  // the same order.
  virtual void sum_to_host(InFlight& in_flight, int64_t begin, int64_t count, float* host, Exchange& owner,
                           int slot) = 0;
};

}  // namespace poseidon::dist
