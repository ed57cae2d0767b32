// The simulator's event queue: events run in time order, ties in the order
// they were scheduled. Most of a large cluster's events are a link's
// messages, which a link schedules in time order, so such events wait in
// their link's first-in, first-out lane and only each lane's first event sits
// in the heap: the heap stays as small as the number of links, whatever the
// number of messages queued, and the order events run in is the same as with
// one heap of them all. An event is a value of type `Event` (the simulator's
// is a small plain struct, so that queuing a message allocates nothing).
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace poseidon::dist {

template <typename Event>
class EventQueue {
 public:
  explicit EventQueue(size_t lanes) : lanes_(lanes) {}

  // Schedules `event` at `time`.
  void at(double time, Event event) {
    size_t slot;
    if (free_slots_.empty()) {
      slot = events_.size();
      events_.push_back(std::move(event));
    } else {
      slot = free_slots_.back();
      free_slots_.pop_back();
      events_[slot] = std::move(event);
    }
    push(Key{time, sequence_++, static_cast<int64_t>(slot)});
  }

  // Schedules `event` at `time` in `lane`; the same order as at(), faster
  // while each lane's times do not decrease (an earlier one goes to the heap).
  void at(size_t lane, double time, Event event) {
    std::deque<Entry>& queue = lanes_[lane];
    if (!queue.empty() && time < queue.back().time) return at(time, std::move(event));
    queue.push_back(Entry{time, sequence_++, std::move(event)});
    if (queue.size() == 1) push(Key{time, queue.front().sequence, -1 - static_cast<int64_t>(lane)});
  }

  bool empty() const { return heap_.empty(); }

  // Takes the earliest event off the queue; returns its time and the event.
  std::pair<double, Event> pop() {
    const Key key = heap_.front();
    if (key.ref >= 0) {
      remove_top();
      const auto slot = static_cast<size_t>(key.ref);
      free_slots_.push_back(slot);
      return {key.time, std::move(events_[slot])};
    }
    std::deque<Entry>& queue = lanes_[static_cast<size_t>(-1 - key.ref)];
    Event event = std::move(queue.front().event);
    queue.pop_front();
    if (queue.empty())
      remove_top();
    else
      replace_top(Key{queue.front().time, queue.front().sequence, key.ref});
    return {key.time, std::move(event)};
  }

 private:
  struct Key {
    double time;
    uint64_t sequence;
    int64_t ref;  // >= 0: a slot of events_; < 0: the first event of lane -1 - ref
  };
  struct Entry {
    double time;
    uint64_t sequence;
    Event event;
  };
  // Sequences are unique, so no two keys tie.
  static bool earlier(const Key& a, const Key& b) {
    return a.time != b.time ? a.time < b.time : a.sequence < b.sequence;
  }
  // A binary min-heap of keys, earliest at the front.
  void push(const Key& key) {
    size_t i = heap_.size();
    heap_.push_back(key);
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!earlier(key, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = key;
  }
  // Puts `key` in place of the front key (one sift down, where a pop and a
  // push would take two).
  void replace_top(const Key& key) {
    const size_t n = heap_.size();
    size_t i = 0;
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && earlier(heap_[child + 1], heap_[child])) ++child;
      if (!earlier(heap_[child], key)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = key;
  }
  void remove_top() {
    const Key last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) replace_top(last);
  }

  std::vector<Key> heap_;
  std::vector<Event> events_;  // of the events scheduled by at(time, event)
  std::vector<size_t> free_slots_;
  std::vector<std::deque<Entry>> lanes_;
  uint64_t sequence_ = 0;
};

}  // namespace poseidon::dist
