// DeviceCosts: how long the profiled device takes for the computation that
// synchronisation adds to an iteration: the solver update, the sums of
// gradients (a PS owner's P pushes, an all-reduce ring's steps) and SFB's
// rebuild GEMM. One definition serves `train --emulate-compute`, which waits
// these times in place of computing them (dist/schemes/emulated_compute.h), and
// `poseidon simulate`, which adds them to its model, so that both charge the
// same seconds for the same work.
//
// From a profile (dist/sim/simulate_profile.h): the update is "update_ms" shared
// by parameter count; a sum streams its inputs and its output through the
// device's memory at "memory_gbps" (none given: sums cost nothing); the
// rebuild runs at a given GEMM rate (the profile's "gflops" where it has one).
#pragma once

#include <cstdint>

#include "core/net.h"
#include "dist/sim/simulate_profile.h"

namespace poseidon::dist {

struct DeviceCosts {
  double update_s_per_param = 0;
  double memory_gbps = 0;  // 0: sums are free
  double gemm_gflops = 0;  // 0: rebuilds are free

  // The solver update of `params` parameters.
  double update_s(int64_t params) const { return update_s_per_param * static_cast<double>(params); }
  // `inputs` arrays of n floats summed into one: inputs + 1 arrays through memory.
  double sum_s(int64_t n, int inputs) const;
  // SFB's rebuild of an FC layer of m outputs and n inputs from `rows` gathered
  // examples: the GEMM dW = U^T V (2 m n rows FLOPs) and the bias' column sums.
  double rebuild_s(int64_t m, int64_t n, int64_t rows, bool bias) const;
  // Every time `factor` times longer (the emulation's --emulate-scale).
  DeviceCosts slowed(double factor) const;
};

// The costs of `profile`'s device for `net` (whose learnable parameters the
// profile's update time is shared among), rebuilding at `gemm_gflops`.
DeviceCosts device_costs(const ComputeProfile& profile, const Net& net, double gemm_gflops);

}  // namespace poseidon::dist
