// DeviceAllreduceExchange: an all-reduce bucket of a net exchanged on its
// GPU (no host mirror: dist/plan/device_staging.h). The device transport
// averages the bucket's range of the net's flat gradient buffer in place on
// the device, behind the compute stream's gradients (fp32, or rounded into
// its bf16 wire slot and summed there), and the Solver then updates the
// bucket's parameters on the device, as a one-process GPU run does
// (Solver::update_all). Every rank receives the same mean from NCCL and
// runs the same update kernels on it, so replicas stay identical. No host
// memory is read or written.
#pragma once

#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/plan/wire.h"
#include "dist/runtime/device_transport.h"
#include "dist/runtime/exchange.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

struct DeviceBucket {
  int64_t begin = 0, count = 0;  // the bucket's range of the flat gradient buffer, padding included
  Wire wire = Wire::fp32;
  std::string label;
};

class DeviceAllreduceExchange : public Exchange {
 public:
  // `params` are the parameters inside the bucket; `transport` moves it.
  DeviceAllreduceExchange(DeviceTransport& transport, Solver& solver, ExchangeCompute& compute,
                          std::vector<Param*> params, DeviceBucket bucket);
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

 private:
  static constexpr int kAveraged = 0, kUpdated = 1;

  DeviceTransport& transport_;
  Solver& solver_;
  ExchangeCompute& compute_;
  std::vector<Param*> params_;
  DeviceBucket bucket_;
  int64_t wire_slot_ = -1;  // the bf16 wire's slice, reserved with the transport
};

}  // namespace poseidon::dist
