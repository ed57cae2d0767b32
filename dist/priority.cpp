// The priority queue of held sends.
#include "dist/priority.h"

namespace poseidon::dist {

void PrioritySends::submit(int64_t priority, int64_t sequence, int64_t bytes, std::function<void()> post) {
  queue_.push(Entry{priority, sequence, bytes, std::move(post)});
}

void PrioritySends::pump() {
  while (!queue_.empty() && (in_flight_ == 0 || in_flight_ + queue_.top().bytes <= window_)) {
    Entry e = queue_.top();
    queue_.pop();
    in_flight_ += e.bytes;
    e.post();
  }
}

}  // namespace poseidon::dist
