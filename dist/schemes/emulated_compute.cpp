// Emulated compute: profiled waits in place of layers, sums, rebuilds and
// updates (see emulated_compute.h).
#include "dist/schemes/emulated_compute.h"

#include <cmath>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "dist/sim/simulate_profile.h"

namespace poseidon::dist {

void OverrunCompensatedWait::operator()(double seconds) {
  const double wait = seconds - overrun_s_;
  if (wait <= 0) {
    overrun_s_ = -wait;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  overrun_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - wait;
}

EmulatedLayers::EmulatedLayers(std::vector<double> forward_s, std::vector<double> backward_s)
    : forward_s_(std::move(forward_s)), backward_s_(std::move(backward_s)) {
  POSEIDON_CHECK(forward_s_.size() == backward_s_.size())
      << "emulated compute needs one forward and one backward time per layer";
}

void EmulatedExchangeCompute::run_for(double seconds, const WorkDone& done) {
  const auto now = std::chrono::steady_clock::now();
  free_at_ = std::max(now, free_at_) +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  done.in_flight.post_timed(free_at_, done.owner, done.slot);
}

void EmulatedExchangeCompute::add(float*, const float*, int64_t n, float, const WorkDone& done) {
  run_for(device_.sum_s(n, 2), done);
}

void EmulatedExchangeCompute::update_block(Solver&, const Param&, float*, const std::vector<const float*>& parts,
                                           float*, float*, int64_t, int64_t n, const WorkDone& done) {
  run_for(device_.sum_s(n, static_cast<int>(parts.size())) + device_.update_s(n), done);
}

void EmulatedExchangeCompute::update(Solver&, const std::vector<Param*>& params, const WorkDone& done) {
  int64_t learnable = 0;
  for (const Param* p : params) learnable += p->learnable ? p->value.numel() : 0;
  run_for(device_.update_s(learnable), done);
}

void EmulatedExchangeCompute::rebuild(Solver&, const Factors& f, int, Param&, Param* bias, const WorkDone& done) {
  const int64_t params = f.m * f.n + (bias ? f.m : 0);
  run_for(device_.rebuild_s(f.m, f.n, f.rows, bias != nullptr) + device_.update_s(params), done);
}

void EmulatedUpdateSink::grad_ready(Param& param) {
  if (param.learnable) wait_(device_.update_s(param.value.numel()));
}

std::shared_ptr<ExchangeCompute> EmulatedCompute::exchange_compute() const {
  return std::make_shared<EmulatedExchangeCompute>(device);
}

EmulatedCompute emulate_compute(Net& net, const std::string& profile_path, double scale, int64_t batch) {
  if (!(scale > 0) || !std::isfinite(scale))
    throw Error("--emulate-scale must be a positive number, not " + std::to_string(scale));
  ComputeProfile profile = load_profile(profile_path, net);
  // The times are for the profile's batch: at another batch they would be wrong without saying so.
  if (profile.batch != batch)
    throw Error("--emulate-compute " + profile_path + " holds times for batch " + std::to_string(profile.batch) +
                ", but data.train.batch_size is " + std::to_string(batch));
  POSEIDON_CHECK(profile.forward_s.size() == net.num_layers()) << "the profile needs a time per layer";
  EmulatedCompute out;
  out.device = device_costs(profile, net, profile.gemm_gflops.value_or(0)).slowed(scale);
  for (double& t : profile.forward_s) t *= scale;
  for (double& t : profile.backward_s) t *= scale;
  out.layers_s = std::accumulate(profile.forward_s.begin(), profile.forward_s.end(), 0.0) +
                 std::accumulate(profile.backward_s.begin(), profile.backward_s.end(), 0.0);
  net.set_layer_runner(std::make_unique<EmulatedLayers>(std::move(profile.forward_s), std::move(profile.backward_s)));
  return out;
}

}  // namespace poseidon::dist
