// The median wall time of a bench program's repeated call, so the C++
// benches report the same statistic measured the same way.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

// Runs `run` once untimed (kernels generated, pages touched), then `rounds`
// times, and returns the median duration in `Unit` (std::milli, std::micro).
template <class Unit, class F>
double median_time(int rounds, F&& run) {
  run();
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    times.push_back(std::chrono::duration<double, Unit>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + rounds / 2, times.end());
  return times[rounds / 2];
}
