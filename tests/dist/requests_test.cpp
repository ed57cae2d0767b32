// dist/exchange's Requests under emulated compute: device work ends when its
// time is up, in the order posted, and the counters the communication
// thread paces its polling by (finished operations, time until the device's
// next piece is due) follow it.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "dist/exchange.h"

namespace poseidon::testing {
namespace {

class Recorder : public dist::Exchange {
 public:
  void start(dist::Requests&) override {}
  void complete(int slot, dist::Requests&) override { completed.push_back(slot); }
  std::string describe(int slot) const override { return "slot " + std::to_string(slot); }
  std::vector<int> completed;
};

TEST(Requests, DeviceWorkFinishesInOrderAndIsCounted) {
  dist::Requests requests;
  Recorder owner;
  requests.post_device(0.6, owner, 1);
  requests.post_device(0.5, owner, 2);  // after the first: the device runs one piece at a time
  const auto first_due = requests.until_device_done();
  EXPECT_GT(first_due, std::chrono::steady_clock::duration::zero());
  EXPECT_LE(first_due, std::chrono::milliseconds(600));
  EXPECT_TRUE(requests.poll().empty());
  EXPECT_EQ(requests.finished(), 0);
  std::this_thread::sleep_for(first_due + std::chrono::milliseconds(1));
  EXPECT_TRUE(requests.poll().empty());  // the second piece is still running
  EXPECT_EQ(owner.completed, (std::vector<int>{1}));
  EXPECT_EQ(requests.finished(), 1);
  std::this_thread::sleep_for(requests.until_device_done() + std::chrono::milliseconds(1));
  const std::vector<dist::Exchange*> idle = requests.poll();
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0], &owner);
  EXPECT_EQ(owner.completed, (std::vector<int>{1, 2}));
  EXPECT_EQ(requests.finished(), 2);
  EXPECT_EQ(requests.until_device_done(), std::chrono::steady_clock::duration::max());
}

}  // namespace
}  // namespace poseidon::testing
