// Emulated compute (`poseidon train --emulate-compute PROFILE`): every
// computation of an iteration becomes a wait of the profiled device's time,
// so that a cluster emulated on one small machine (tools/cluster) trains at
// that device's pace while its communication (the real parameter and
// gradient buffers over real MPI) stays real. The values computed are
// meaningless; the timing of gates, gradient reports and transfers is what
// is measured. Each piece stands in behind the interface the real
// computation uses:
//   - the layers' forward and backward: a LayerRunner (core/layer_runner.h);
//   - the exchanges' sums, rebuilds and updates: an ExchangeCompute
//     (dist/schemes/exchange_compute.h) whose work runs one piece at a time, in the
//     order posted, on the emulated device;
//   - a single process's updates: a GradSink that waits on the compute thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/events.h"
#include "core/layer_runner.h"
#include "core/net.h"
#include "dist/schemes/exchange_compute.h"
#include "dist/sim/device_costs.h"

namespace poseidon::dist {

// Sleeps end late, by more on a loaded machine, and an iteration of hundreds
// of small waits would add that up: what one wait overran is taken off the
// next, so the waits sum to the profile's time.
class OverrunCompensatedWait {
 public:
  void operator()(double seconds);

 private:
  double overrun_s_ = 0;
};

// The layers' bodies as waits of per-layer forward and backward times.
class EmulatedLayers : public LayerRunner {
 public:
  EmulatedLayers(std::vector<double> forward_s, std::vector<double> backward_s);
  void forward(size_t index, Layer&, LayerIO&, RunContext&) override { wait_(forward_s_.at(index)); }
  void backward(size_t index, Layer&, LayerIO&, RunContext&) override { wait_(backward_s_.at(index)); }

 private:
  std::vector<double> forward_s_, backward_s_;
  OverrunCompensatedWait wait_;
};

// The exchanges' arithmetic as work of the device's time, queued on it.
class EmulatedExchangeCompute : public ExchangeCompute {
 public:
  explicit EmulatedExchangeCompute(const DeviceCosts& device) : device_(device) {}
  void add(float*, const float*, int64_t n, float, const WorkDone& done) override;
  void update_block(Solver&, const Param&, float*, const std::vector<const float*>& parts, float*, float*, int64_t,
                    int64_t n, const WorkDone& done) override;
  void update(Solver&, const std::vector<Param*>& params, const WorkDone& done) override;
  void rebuild(Solver&, const Factors& factors, int, Param&, Param* bias, const WorkDone& done) override;
  void encode_wire(const float*, uint16_t*, int64_t) override {}
  void decode_wire(const uint16_t*, float*, int64_t) override {}
  void round_wire(float*, int64_t) override {}
  const float* wire_rounded(const float* x, std::vector<float>&, int64_t) override { return x; }
  int receive_buffers(int) const override { return 1; }
  void compress(const std::function<void()>&, int64_t n, int64_t m, int64_t columns, const WorkDone& done) override {
    run_for(device_.rebuild_s(n, m, columns, false), done);
  }

 private:
  void run_for(double seconds, const WorkDone& done);
  DeviceCosts device_;
  std::chrono::steady_clock::time_point free_at_;  // when the device's queued work is over
};

// A single process's updates as waits on the compute thread.
class EmulatedUpdateSink : public GradSink {
 public:
  explicit EmulatedUpdateSink(const DeviceCosts& device) : device_(device) {}
  void grad_ready(Param& param) override;

 private:
  DeviceCosts device_;
  OverrunCompensatedWait wait_;
};

// What loading a profile onto a Net leaves beside it: the costs of the
// device's other computation.
struct EmulatedCompute {
  DeviceCosts device;
  double layers_s = 0;  // forward plus backward of one iteration

  // An ExchangeCompute for the scheduler of a distributed run.
  std::shared_ptr<ExchangeCompute> exchange_compute() const;
};

// Makes `net` (through EmulatedLayers) wait `scale` times each layer's forward_ms and backward_ms of
// `profile_path` (`poseidon time --json` format, read as
// dist/sim/simulate_profile.h reads it: every layer of the net must have an
// entry) in place of computing. `batch`, the examples per rank, must be the
// profile's batch. Times and costs are `scale` times the profile's.
EmulatedCompute emulate_compute(Net& net, const std::string& profile_path, double scale, int64_t batch);

}  // namespace poseidon::dist
