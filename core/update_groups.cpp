// Building the many-parameter update's table, and its host walk (see
// update_groups.h).
#include "core/update_groups.h"

namespace poseidon {

void add_update_slice(std::vector<UpdateSlice>& table, const UpdateStep& step, float* value, const float* grad,
                      float* state, int64_t n, RoundedOut rounded) {
  const int64_t begin = table.empty() ? 0 : table.back().end;
  table.push_back(UpdateSlice{step, value, grad, state, rounded, begin, begin + n});
}

void apply_update_table(const UpdateSlice* table, int count, const float* rejected, int64_t threads) {
  for (int64_t thread = 0; thread < threads; ++thread) update_table_walk(table, count, rejected, thread, threads);
}

}  // namespace poseidon
