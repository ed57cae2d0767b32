// Grouping parameters for the many-parameter update, and its host walk (see
// update_groups.h).
#include "core/update_groups.h"

namespace poseidon {

void add_update_slice(std::vector<UpdateGroup>& groups, const UpdateStep& step, float* value, const float* grad,
                      float* state, int64_t n) {
  if (groups.empty() || groups.back().count == UpdateGroup::kMaxSlices) groups.emplace_back();
  UpdateGroup& g = groups.back();
  const int64_t begin = g.total();
  g.slices[g.count++] = UpdateSlice{step, value, grad, state, begin, begin + n};
}

void apply_update_group(const UpdateGroup& g, int64_t threads) {
  const int64_t total = g.total();
  for (int64_t thread = 0; thread < threads; ++thread) {
    int slice = 0;
    for (int64_t t = thread; t < total; t += threads) update_group_element(g, t, slice);
  }
}

}  // namespace poseidon
