// The Solver's update of many parameters in one pass: on a GPU one launch
// over every parameter instead of one per parameter. The update table lays
// the parameters end to end in one range of element numbers; a thread finds
// the parameter of its first element by a binary search of the table and
// those of its later, larger, elements by moving forward through it. The
// table lives in GPU memory, copied there once per step from pinned memory
// (device_memory::StepUpload), so the launch's arguments are the same every
// step: the numbers that change (learning rate, bias corrections) are read
// from the table, and a CUDA graph can replay the launch. The walk is shared
// by the GPU kernel (core/cuda/kernels.cu) and the host reference that the
// tests compare it with (apply_update_table), and each element runs the
// element function of core/update_rules.h that the per-parameter update runs.
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
  RoundedOut rounded;      // the value's copy rounded to bfloat16, where a layer reads one
  int64_t begin = 0, end = 0;  // the parameter's elements in the table's range
};

// Appends a parameter of n elements after the last slice of `table`.
void add_update_slice(std::vector<UpdateSlice>& table, const UpdateStep& step, float* value, const float* grad,
                      float* state, int64_t n, RoundedOut rounded = {});

POSEIDON_HOST_DEVICE inline int64_t update_total(const UpdateSlice* table, int count) {
  return count ? table[count - 1].end : 0;
}

// The slice holding element t (< update_total): the first whose end lies
// beyond t, so empty slices are passed over.
POSEIDON_HOST_DEVICE inline int find_update_slice(const UpdateSlice* table, int count, int64_t t) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table[mid].end > t)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// Element i of the slice's parameter.
POSEIDON_HOST_DEVICE inline void update_slice_element(const UpdateSlice& s, int64_t i) {
  const int64_t n = s.end - s.begin;
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
  write_rounded(s.rounded, s.value, i);
}

// One thread's share of the table: elements first, first + stride, ...
// Nothing changes where `rejected` (may be null) holds a non-zero value: the
// finite guard's flag (core/gate_scan.h), set by the pass before it.
POSEIDON_HOST_DEVICE inline void update_table_walk(const UpdateSlice* table, int count, const float* rejected,
                                                   int64_t first, int64_t stride) {
  if (rejected && *rejected != 0.f) return;
  const int64_t total = update_total(table, count);
  if (first >= total) return;
  int slice = find_update_slice(table, count, first);
  for (int64_t t = first; t < total; t += stride) {
    while (t >= table[slice].end) ++slice;
    update_slice_element(table[slice], t - table[slice].begin);
  }
}

// The kernel's work on the host: each of `threads` threads walks its
// elements as a grid-stride loop does.
void apply_update_table(const UpdateSlice* table, int count, const float* rejected, int64_t threads);

}  // namespace poseidon
