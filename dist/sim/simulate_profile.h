// ComputeProfile: how long one worker computes each layer, the input of the
// scheduler simulation (dist/sim/simulate.h). Read from the JSON that
// `poseidon time --json` writes ({"batch", "update_ms", "layers": [{"name",
// "forward_ms", "backward_ms"}, ...]}, optionally "gflops" and "memory_gbps",
// the device's GEMM rate and memory bandwidth; without "gflops" the rate of
// its fc layers stands for it; profiles/ holds shipped ones), or
// derived from each layer's forward FLOPs at a given rate when no profile
// was measured (backward twice forward, the update negligible).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/net.h"

namespace poseidon::dist {

struct ComputeProfile {
  std::string source;                         // the file, or how the times were derived
  int64_t batch = 0;                          // examples per worker the times are for
  std::vector<double> forward_s, backward_s;  // per layer of the Net, in its order
  double update_s = 0;                        // the solver update of every parameter, on one worker
  std::optional<double> gemm_gflops;          // "gflops": the rate of the device the profile describes
  bool gemm_from_fc_layers = false;           // no "gflops": the rate its fc layers' forward ran at
  std::optional<double> memory_gbps;          // "memory_gbps": its memory bandwidth, GB/s

  // One worker's iteration with no communication: forward, backward, update.
  double iteration_s() const;
};

// Reads a profile for `net`. Every layer of the net must have an entry and
// every entry must name a layer of the net; errors name the file and the layer.
ComputeProfile load_profile(const std::string& path, const Net& net);

// Each layer's forward at `gflops` from Layer::forward_flops at `batch`
// examples (FLOPs grow linearly with the batch, so a Net of any batch does).
ComputeProfile flops_profile(const Net& net, int64_t batch, double gflops);

}  // namespace poseidon::dist
