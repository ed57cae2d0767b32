// Loads a compute profile onto a Net as per-layer waits, and the device's
// other costs for the updates (see emulate_compute.h).
#include "tools/cli/emulate_compute.h"

#include <cmath>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "dist/simulate_profile.h"

namespace poseidon {

EmulatedCompute emulate_compute(Net& net, const std::string& profile_path, double scale, int64_t batch) {
  if (!(scale > 0) || !std::isfinite(scale))
    throw Error("--emulate-scale must be a positive number, not " + std::to_string(scale));
  dist::ComputeProfile profile = dist::load_profile(profile_path, net);
  // The times are for the profile's batch: at another batch they would be wrong without saying so.
  if (profile.batch != batch)
    throw Error("--emulate-compute " + profile_path + " holds times for batch " + std::to_string(profile.batch) +
                ", but data.train.batch_size is " + std::to_string(batch));
  EmulatedCompute out;
  out.device = dist::device_costs(profile, net, profile.gemm_gflops.value_or(0)).slowed(scale);
  for (double& t : profile.forward_s) t *= scale;
  for (double& t : profile.backward_s) t *= scale;
  out.layers_s = std::accumulate(profile.forward_s.begin(), profile.forward_s.end(), 0.0) +
                 std::accumulate(profile.backward_s.begin(), profile.backward_s.end(), 0.0);
  net.emulate_compute(std::move(profile.forward_s), std::move(profile.backward_s));
  return out;
}

void EmulatedUpdateSink::grad_ready(Param& param) {
  if (!param.learnable) return;
  using Clock = std::chrono::steady_clock;
  const auto wait =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(device_.update_s(param.value.numel())));
  const auto start = Clock::now();
  if (wait > overrun_) std::this_thread::sleep_for(wait - overrun_);
  overrun_ = Clock::now() - start - (wait - overrun_);
  if (overrun_ < Clock::duration::zero()) overrun_ = Clock::duration::zero();
}

}  // namespace poseidon
