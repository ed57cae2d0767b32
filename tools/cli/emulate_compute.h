// Emulated compute (`poseidon train --emulate-compute PROFILE`): every layer's
// forward and backward become waits of the profiled times, and so does the
// rest of an iteration's computation (solver updates, sums of gradients, SFB
// rebuilds: dist/device_costs.h), so that a cluster emulated on one small
// machine (tools/cluster) trains at the pace of the profiled device while its
// communication (the real parameter and gradient buffers over real MPI) stays
// real. The values computed are meaningless; the timing of gates, gradient
// reports and transfers is what is measured.
#pragma once

#include <chrono>
#include <string>

#include "core/events.h"
#include "core/net.h"
#include "dist/device_costs.h"

namespace poseidon {

struct EmulatedCompute {
  double layers_s = 0;       // forward plus backward of one iteration
  dist::DeviceCosts device;  // updates, sums and rebuilds, at the same scale
};

// Makes `net` wait `scale` times each layer's forward_ms and backward_ms of
// `profile_path` (`poseidon time --json` format, read as dist/simulate_profile.h
// reads it: every layer of the net must have an entry) in place of computing.
// `batch`, the examples per rank, must be the profile's batch. Returns the
// emulated layer time of one iteration and the device's other costs, both
// `scale` times the profile's.
EmulatedCompute emulate_compute(Net& net, const std::string& profile_path, double scale, int64_t batch);

// Training in one process under emulated compute: each parameter's update is
// a wait of its DeviceCosts::update_s on the compute thread, where
// LocalGradSink would compute it. What a wait overran is taken off the next.
class EmulatedUpdateSink : public GradSink {
 public:
  explicit EmulatedUpdateSink(const dist::DeviceCosts& device) : device_(device) {}
  void grad_ready(Param& param) override;

 private:
  dist::DeviceCosts device_;
  std::chrono::steady_clock::duration overrun_{};
};

}  // namespace poseidon
