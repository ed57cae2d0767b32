// The median wall time of repeated runs, for the start-up probes (the GEMM
// rate here, the link in dist/runtime/link_probe.cpp): a few runs delayed by
// the scheduler (other processes on the host's cores) do not move it.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace poseidon::dist {

template <class Run>
double median_seconds(int reps, Run&& run) {
  std::vector<double> seconds(reps);
  for (double& s : seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(seconds.begin(), seconds.begin() + reps / 2, seconds.end());
  return seconds[reps / 2];
}

}  // namespace poseidon::dist
