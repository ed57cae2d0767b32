// PrioritySends: with dist.order: priority, the parameter server's sends wait
// here and leave lowest layer first, at most `window` bytes in flight (after
// P3 and ByteScheduler). Backward reports the top layers first, so without
// this their large blocks would occupy the link while the lowest layers'
// blocks, which the next forward needs first, queue behind them. The order
// is the layer, then ps_send_sequence (below). Receives are
// never held back: every send can complete whatever its peer's queue holds,
// so holding sends cannot deadlock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace poseidon::dist {

// The sequence of a parameter server's send within its layer's priority:
// block `b` of its group (id `id`), from rank `from` to rank `to` of `ranks`.
// Blocks go in rounds of `ranks` (their owners taken in turn), and within a
// round each rank starts with the rank after it: at any moment the ranks
// send to different ranks (a permutation, so no receiver's link takes seven
// streams while others idle), and an owner has a round's pushes from every
// rank at about the same time. The block id breaks ties.
int64_t ps_send_sequence(size_t b, int64_t id, int from, int to, int ranks);

// The window of held sends: a block to each other rank (at least two), so
// that a round of ps_send_sequence is in flight at once.
int64_t priority_window_bytes(int64_t block_bytes, int ranks);

class PrioritySends {
 public:
  explicit PrioritySends(int64_t window_bytes) : window_(window_bytes) {}
  // Queues a send of `bytes`; `post` issues it. Lower `priority`, then lower
  // `sequence`, goes first.
  void submit(int64_t priority, int64_t sequence, int64_t bytes, std::function<void()> post);
  // A send that went out from here has completed.
  void sent(int64_t bytes) { in_flight_ -= bytes; }
  // The next queued send the window has room for (always one when nothing
  // is in flight), counted in flight from now; empty when there is none.
  // The caller issues it.
  std::function<void()> release();
  // Issues queued sends while the window has room.
  void pump() {
    while (std::function<void()> post = release()) post();
  }
  bool empty() const { return queue_.empty(); }

 private:
  struct Entry {
    int64_t priority, sequence, bytes;
    std::function<void()> post;
    bool operator>(const Entry& o) const {
      return priority != o.priority ? priority > o.priority : sequence > o.sequence;
    }
  };
  int64_t window_;
  int64_t in_flight_ = 0;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_;
};

}  // namespace poseidon::dist
