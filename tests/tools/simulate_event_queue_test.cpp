// The simulator's event queue (dist/sim/event_queue.h) keeps a link's events
// in lanes, and must still run every event in time order, ties in the order
// they were scheduled, as one heap of them all would: lanes against events
// outside them, ties across lanes, a lane's time going back, and events
// scheduled while others run; and, over many random events, the same order
// as sorting them all by time and scheduling order.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "dist/sim/event_queue.h"

namespace poseidon::dist {
namespace {

TEST(SimulateEventQueue, RunsEventsInTimeThenSchedulingOrderAcrossLanes) {
  EventQueue<std::function<void()>> queue(2);
  std::vector<int> ran;
  auto record = [&ran](int id) { return [&ran, id] { ran.push_back(id); }; };
  queue.at(0, 2.0, record(1));
  queue.at(3.0, record(2));
  queue.at(1, 2.0, record(3));  // ties with 1, scheduled after it
  queue.at(0, 1.0, record(4));  // earlier than its lane's last: still first
  queue.at(1, 5.0, record(5));
  queue.at(0, 2.0, record(6));
  queue.at(1.0, record(7));     // ties with 4, scheduled after it
  queue.at(1, 4.0, record(8));  // earlier than its lane's last
  while (!queue.empty()) queue.pop().second();
  EXPECT_EQ(ran, (std::vector<int>{4, 7, 1, 3, 6, 2, 8, 5}));
}

TEST(SimulateEventQueue, EventsScheduledWhileRunningKeepTheOrder) {
  EventQueue<std::function<void()>> queue(1);
  std::vector<int> ran;
  queue.at(0, 1.0, [&] {
    ran.push_back(1);
    queue.at(0, 1.0, [&] { ran.push_back(3); });  // the lane emptied, then refilled
    queue.at(1.0, [&] { ran.push_back(4); });
  });
  queue.at(1.0, [&] { ran.push_back(2); });
  while (!queue.empty()) {
    auto [time, action] = queue.pop();
    EXPECT_EQ(time, 1.0);
    action();
  }
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
}

// Plain values as events, as the simulator queues them: thousands of events
// in lanes and outside them, with ties, lanes going back in time, and events
// scheduled from inside events, come out as one sort by (time, scheduling
// order) puts them.
TEST(SimulateEventQueue, ManyEventsComeOutInTheOrderOfOneSort) {
  struct Scheduled {
    double time;
    int id;
  };
  EventQueue<Scheduled> queue(8);
  std::mt19937 random(47);
  std::vector<std::tuple<double, int>> expected;  // (time, id): ids count the scheduling order
  int next_id = 0;
  double now = 0;
  auto schedule = [&] {
    const double time = now + static_cast<double>(random() % 16) / 4;  // ties are common
    const int id = next_id++;
    expected.emplace_back(time, id);
    if (random() % 3 == 0)
      queue.at(time, Scheduled{time, id});
    else
      queue.at(random() % 8, time, Scheduled{time, id});
  };
  for (int i = 0; i < 2000; ++i) schedule();
  std::vector<int> ran;
  while (!queue.empty()) {
    const auto [time, event] = queue.pop();
    ASSERT_EQ(time, event.time);
    ASSERT_GE(time, now);
    now = time;
    ran.push_back(event.id);
    if (next_id < 6000 && random() % 2 == 0) schedule();
  }
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(ran.size(), expected.size());
  for (size_t i = 0; i < ran.size(); ++i) ASSERT_EQ(ran[i], std::get<1>(expected[i])) << "event " << i;
}

}  // namespace
}  // namespace poseidon::dist
