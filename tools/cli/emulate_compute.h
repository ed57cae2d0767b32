// Emulated compute (`poseidon train --emulate-compute PROFILE`): every layer's
// forward and backward become waits of the profiled times, so that a cluster
// emulated on one small machine (tools/cluster) trains at the pace of the
// profiled device while its communication (the real parameter and gradient
// buffers over real MPI) stays real. The values computed are meaningless;
// the timing of gates, gradient reports and transfers is what is measured.
#pragma once

#include <string>

#include "core/net.h"

namespace poseidon {

// Makes `net` wait `scale` times each layer's forward_ms and backward_ms of
// `profile_path` (`poseidon time --json` format, read as dist/simulate_profile.h
// reads it: every layer of the net must have an entry) in place of computing.
// `batch`, the examples per rank, must be the profile's batch. Returns the
// emulated forward plus backward time of one iteration, in seconds.
double emulate_compute(Net& net, const std::string& profile_path, double scale, int64_t batch);

}  // namespace poseidon
