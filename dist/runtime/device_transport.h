// DeviceTransport: sums a range of the flat gradient buffer over the ranks
// where the gradients were computed, on their devices; dist/runtime/
// nccl_transport.h moves it with NCCL on the GPUs' memory. An all-reduce
// bucket (dist/schemes/allreduce.h) names its range; the transport knows
// where it lies on the device, so no exchange handles a device pointer.
//
// Two ways out of it: the sum lands in the host's copy of the range (a net
// staged through a host mirror, where the exchange averages and updates on
// the host), or the mean stays in place on the device (a net exchanged on
// its device: dist/plan/device_staging.h), where the update follows on the
// device. A device sum starts only after the compute stream has produced
// the gradients: gradients_queued(), called by the thread that runs backward
// before it reports them, marks that point, and the transport's stream waits
// for the last mark on the device, the host never.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "dist/plan/wire.h"
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

  // The device side, optional: a transport that lands sums on the host only
  // (a test's stand-in) keeps these, which refuse.
  // The compute stream's work queued so far has produced every gradient
  // backward is about to report.
  virtual void gradients_queued() {}
  // Room for a bucket of `count` elements on the bf16 wire, reserved while
  // the exchanges are built: the slot mean_on_device takes for it.
  virtual int64_t reserve_wire(int64_t /*count*/) { throw Error("this device transport sums to the host only"); }
  // Starts averaging elements [begin, begin + count) of the device net's
  // flat gradients over the ranks, in place on the device, behind the last
  // gradients_queued(); owner.complete(slot) hears when the mean is there.
  // On the bf16 wire the range is rounded into `wire_slot` (reserve_wire's)
  // and summed there, then widened back. Every rank starts them in the same
  // order.
  virtual void mean_on_device(InFlight& /*in_flight*/, int64_t /*begin*/, int64_t /*count*/, Wire /*wire*/,
                              int64_t /*wire_slot*/, Exchange& /*owner*/, int /*slot*/) {
    throw Error("this device transport sums to the host only");
  }
};

}  // namespace poseidon::dist
