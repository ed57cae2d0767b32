// The priority queue of held sends.
#include "dist/plan/priority.h"

#include <algorithm>

namespace poseidon::dist {

int64_t ps_send_sequence(size_t b, int64_t id, int from, int to, int ranks) {
  const int64_t round = static_cast<int64_t>(b) / ranks;
  const int64_t distance = ((to - from - 1) % ranks + ranks) % ranks;
  return ((round * ranks + distance) << 32) + id;
}

int64_t priority_window_bytes(int64_t block_bytes, int ranks) { return block_bytes * std::max(2, ranks - 1); }

void PrioritySends::submit(int64_t priority, int64_t sequence, int64_t bytes, std::function<void()> post) {
  queue_.push(Entry{priority, sequence, bytes, std::move(post)});
}

std::function<void()> PrioritySends::release() {
  if (queue_.empty() || (in_flight_ > 0 && in_flight_ + queue_.top().bytes > window_)) return {};
  Entry e = queue_.top();
  queue_.pop();
  in_flight_ += e.bytes;
  return std::move(e.post);
}

}  // namespace poseidon::dist
