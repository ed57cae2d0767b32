// Where a GPU net's exchange works, decided per layer from the plan: a
// layer whose groups are all-reduce buckets is averaged by the device
// transport (NCCL) in the net's own flat gradient buffer on the GPU and
// updated there; a layer whose scheme computes on the host (the parameter
// server's owner update, SFB's gathered factors, low-rank's power
// iteration) needs its gradient staged to host memory, one copy each way.
// Without a device transport (ranks that share a GPU: NCCL takes one per
// rank) every layer goes through the host. A net none of whose layers needs
// the host gets no host mirror.
//
// A bucket on the bf16 wire is rounded on the device into a slice of one
// buffer of 16-bit numbers that NCCL sums; DeviceWireSlices lays those
// slices out, each aligned for NCCL's widest loads, none overlapping
// another, since buckets are in flight together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/net.h"
#include "core/solver.h"
#include "dist/plan/plan.h"

namespace poseidon::dist {

// Whether a scheme's exchange computes on host memory.
bool scheme_needs_host(Scheme scheme);

// Per layer of the plan's net (plan.layer_groups' indices): whether its
// gradients must be staged to the host. `device_transport`: the ranks have
// a transport that sums on their devices (every rank a GPU of its own).
// Layers without learnable parameters need nothing.
std::vector<bool> layers_needing_host(const CommPlan& plan, bool device_transport);
// Whether any layer of the plan needs the host (then the net gets a host mirror).
bool any_layer_needs_host(const CommPlan& plan, bool device_transport);

// Points the plan's parameters of the layers not `staged` at `device_net`'s
// (the GPU net a host mirror was made from: the same model, so the same
// layers, parameters and flat-buffer offsets), so that their exchanges work
// on the device and never read the mirror. The others keep the mirror's.
void exchange_unstaged_on_device(CommPlan& plan, const std::vector<bool>& staged, Net& device_net);

// Moves each parameter's solver state (as a checkpoint restored it, on the
// device of the net it was loaded into) to the device of the plan's
// parameter of that name, where its exchange updates it.
void place_solver_state(Solver& solver, const CommPlan& plan);

class DeviceWireSlices {
 public:
  // NCCL's and the cast kernels' alignment of a slice, in bytes.
  static constexpr int64_t kAlignBytes = 256;
  static constexpr int64_t kAlignElements = kAlignBytes / static_cast<int64_t>(sizeof(uint16_t));

  // Room for a bucket of `count` bf16 numbers: returns its first element.
  int64_t reserve(int64_t count);
  // Elements the buffer must hold: every slice, the last one's end rounded
  // up to the alignment.
  int64_t total() const { return total_; }
  int64_t bytes() const { return total_ * static_cast<int64_t>(sizeof(uint16_t)); }

 private:
  int64_t total_ = 0;
};

}  // namespace poseidon::dist
