// The profiled device's time for updates, sums and SFB rebuilds.
#include "dist/sim/device_costs.h"

#include "core/error.h"

namespace poseidon::dist {

double DeviceCosts::sum_s(int64_t n, int inputs) const {
  if (memory_gbps <= 0) return 0;
  return static_cast<double>(inputs + 1) * 4.0 * static_cast<double>(n) / (memory_gbps * 1e9);
}

double DeviceCosts::rebuild_s(int64_t m, int64_t n, int64_t rows, bool bias) const {
  const double gemm = gemm_gflops > 0 ? 2.0 * m * n * static_cast<double>(rows) / (gemm_gflops * 1e9) : 0;
  return gemm + (bias ? sum_s(m, static_cast<int>(rows)) : 0);
}

DeviceCosts DeviceCosts::slowed(double factor) const {
  POSEIDON_CHECK(factor > 0) << factor;
  return DeviceCosts{update_s_per_param * factor, memory_gbps / factor, gemm_gflops / factor};
}

DeviceCosts device_costs(const ComputeProfile& profile, const Net& net, double gemm_gflops) {
  DeviceCosts c;
  const int64_t params = net.num_learnable();
  c.update_s_per_param = params > 0 ? profile.update_s / static_cast<double>(params) : 0;
  c.memory_gbps = profile.memory_gbps.value_or(0);
  c.gemm_gflops = gemm_gflops;
  return c;
}

}  // namespace poseidon::dist
