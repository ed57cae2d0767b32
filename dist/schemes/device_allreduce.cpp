// A bucket averaged and updated on its GPU (see device_allreduce.h).
#include "dist/schemes/device_allreduce.h"

#include "core/error.h"

namespace poseidon::dist {

DeviceAllreduceExchange::DeviceAllreduceExchange(DeviceTransport& transport, Solver& solver, ExchangeCompute& compute,
                                                 std::vector<Param*> params, DeviceBucket bucket)
    : transport_(transport),
      solver_(solver),
      compute_(compute),
      params_(std::move(params)),
      bucket_(std::move(bucket)) {
  for (const Param* p : params_)
    POSEIDON_CHECK(p->value.is_cuda()) << "parameter '" << p->name << "' of a device bucket is on the host";
  if (bucket_.wire == Wire::bf16) wire_slot_ = transport_.reserve_wire(bucket_.count);
}

void DeviceAllreduceExchange::start(InFlight& in_flight) {
  transport_.mean_on_device(in_flight, bucket_.begin, bucket_.count, bucket_.wire, wire_slot_, *this, kAveraged);
}

void DeviceAllreduceExchange::complete(int slot, InFlight& in_flight) {
  if (slot == kUpdated) return;
  // The mean is in place: the update's kernels, queued on the compute
  // stream, follow it and come before the next forward of these layers,
  // whose gates open when this returns.
  compute_.update(solver_, params_, {in_flight, *this, kUpdated});
}

std::string DeviceAllreduceExchange::describe(int slot) const {
  if (slot == kUpdated) return "the update on the GPU of " + bucket_.label;
  return "the NCCL all-reduce on the GPU of " + bucket_.label + " (" + wire_name(bucket_.wire) +
         "; a collective: a rank that never joins it stalls every other)";
}

}  // namespace poseidon::dist
