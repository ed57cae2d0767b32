// The Solver's update of many parameters in few passes: on a GPU one launch
// per group of up to UpdateGroup::kMaxSlices parameters instead of one per
// parameter. A group lays its parameters end to end in one range of
// element numbers; a thread walking that range in increasing order finds
// each element's parameter by moving forward through the slices, so the
// table needs no search. The group travels as the kernel's argument (it fits
// the 4 KiB a launch may carry): no table is copied to the device and the
// host does not wait. The walk is shared by the GPU kernel
// (core/cuda/kernels.cu) and the host reference that the tests compare it
// with (apply_update_group), and each element runs the element function of
// core/update_rules.h that the per-parameter update runs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/host_device.h"
#include "core/update_rules.h"

namespace poseidon {

struct UpdateSlice {
  UpdateStep step;
  float* value = nullptr;
  const float* grad = nullptr;
  float* state = nullptr;  // null where the rule keeps none (SGD without momentum)
  int64_t begin = 0, end = 0;  // the parameter's elements in the group's range
};

struct UpdateGroup {
  static constexpr int kMaxSlices = 36;
  UpdateSlice slices[kMaxSlices];
  int count = 0;
  POSEIDON_HOST_DEVICE int64_t total() const { return count ? slices[count - 1].end : 0; }
};

// Appends a parameter of n elements to the last group of `groups`, or to a
// new one where that is full (or there is none).
void add_update_slice(std::vector<UpdateGroup>& groups, const UpdateStep& step, float* value, const float* grad,
                      float* state, int64_t n);

// Updates element t (< g.total()) of the group's range. `slice` is where the
// caller's previous, smaller, t was found (0 before the first); it moves on.
POSEIDON_HOST_DEVICE inline void update_group_element(const UpdateGroup& g, int64_t t, int& slice) {
  while (t >= g.slices[slice].end) ++slice;
  const UpdateSlice& s = g.slices[slice];
  const int64_t n = s.end - s.begin, i = t - s.begin;
  switch (s.step.rule) {
    case UpdateRule::sgd:
      sgd_element(s.step, s.value, s.grad, s.state, i);
      break;
    case UpdateRule::adam:
      adam_element(s.step, s.value, s.grad, s.state, s.state + n, i);
      break;
    case UpdateRule::rmsprop: {
      float *buf, *avg;
      rmsprop_slots(s.step, s.state, n, &buf, &avg);
      rmsprop_element(s.step, s.value, s.grad, s.state, buf, avg, i);
      break;
    }
  }
}

// The kernel's work on the host: each of `threads` threads walks the
// elements t = thread, thread + threads, ... as a grid-stride loop does.
void apply_update_group(const UpdateGroup& g, int64_t threads);

}  // namespace poseidon
