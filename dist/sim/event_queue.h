// The simulator's event queue: events run in time order, ties in the order
// they were scheduled. Most of a large cluster's events are a link's
// messages, which a link schedules in time order, so such events wait in
// their link's first-in, first-out lane and only each lane's first event sits
// in the heap: the heap stays as small as the number of links, whatever the
// number of messages queued, and the order events run in is the same as with
// one heap of them all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

namespace poseidon::dist {

class EventQueue {
 public:
  using Action = std::function<void()>;

  explicit EventQueue(size_t lanes) : lanes_(lanes) {}

  // Schedules `action` at `time`.
  void at(double time, Action action) {
    size_t slot;
    if (free_slots_.empty()) {
      slot = actions_.size();
      actions_.push_back(std::move(action));
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
      actions_[slot] = std::move(action);
    }
    push(Key{time, sequence_++, static_cast<int64_t>(slot)});
  }

  // Schedules `action` at `time` in `lane`; the same order as at(), faster
  // while each lane's times do not decrease (an earlier one goes to the heap).
  void at(size_t lane, double time, Action action) {
    std::deque<Entry>& queue = lanes_[lane];
    if (!queue.empty() && time < queue.back().time) return at(time, std::move(action));
    queue.push_back(Entry{time, sequence_++, std::move(action)});
    if (queue.size() == 1) push(Key{time, queue.front().sequence, -1 - static_cast<int64_t>(lane)});
  }

  bool empty() const { return heap_.empty(); }

  // Takes the earliest event off the queue; returns its time and action.
  std::pair<double, Action> pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Key key = heap_.back();
    heap_.pop_back();
    if (key.ref >= 0) {
      const auto slot = static_cast<size_t>(key.ref);
      free_slots_.push_back(slot);
      return {key.time, std::move(actions_[slot])};
    }
    std::deque<Entry>& queue = lanes_[static_cast<size_t>(-1 - key.ref)];
    Action action = std::move(queue.front().action);
    queue.pop_front();
    if (!queue.empty()) push(Key{queue.front().time, queue.front().sequence, key.ref});
    return {key.time, std::move(action)};
  }

 private:
  struct Key {
    double time;
    uint64_t sequence;
    int64_t ref;  // >= 0: a slot of actions_; < 0: the first event of lane -1 - ref
  };
  struct Entry {
    double time;
    uint64_t sequence;
    Action action;
  };
  struct Later {  // the heap's order: earliest first
    bool operator()(const Key& a, const Key& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };
  void push(const Key& key) {
    heap_.push_back(key);
    std::push_heap(heap_.begin(), heap_.end(), Later{});
  }

  std::vector<Key> heap_;
  std::vector<Action> actions_;  // of the events scheduled by at(time, action)
  std::vector<size_t> free_slots_;
  std::vector<std::deque<Entry>> lanes_;
  uint64_t sequence_ = 0;
};

}  // namespace poseidon::dist
