// The simulator's event queue (dist/sim/event_queue.h) keeps a link's events
// in lanes, and must still run every event in time order, ties in the order
// they were scheduled, as one heap of them all would: lanes against events
// outside them, ties across lanes, a lane's time going back, and events
// scheduled while others run.
#include <gtest/gtest.h>

#include <vector>

#include "dist/sim/event_queue.h"

namespace poseidon::dist {
namespace {

TEST(SimulateEventQueue, RunsEventsInTimeThenSchedulingOrderAcrossLanes) {
  EventQueue queue(2);
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
  EventQueue queue(1);
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

}  // namespace
}  // namespace poseidon::dist
