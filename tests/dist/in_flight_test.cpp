// dist/exchange's InFlight with the timed work of emulated compute
// (dist/schemes/emulated_compute.h): the device's work ends when its time is up, one
// piece after the other in the order posted, and the counters the
// communication thread paces its polling by (finished operations, time until
// the next timed piece is due) follow it.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "dist/runtime/exchange.h"
#include "dist/schemes/emulated_compute.h"

namespace poseidon::testing {
namespace {

class Recorder : public dist::Exchange {
 public:
  void start(dist::InFlight&) override {}
  void complete(int slot, dist::InFlight&) override { completed.push_back(slot); }
  std::string describe(int slot) const override { return "slot " + std::to_string(slot); }
  std::vector<int> completed;
};

TEST(InFlight, EmulatedDeviceWorkFinishesInOrderAndIsCounted) {
  dist::InFlight in_flight;
  Recorder owner;
  dist::DeviceCosts device;
  device.memory_gbps = 0.02;  // a sum of two arrays of n floats moves 12 n bytes: 0.6 s for 1e6
  dist::EmulatedExchangeCompute compute(device);
  compute.add(nullptr, nullptr, 1000000, 1.f, {in_flight, owner, 1});
  compute.add(nullptr, nullptr, 833333, 1.f, {in_flight, owner, 2});  // after the first: one piece at a time
  const auto first_due = in_flight.until_timed_done();
  EXPECT_GT(first_due, std::chrono::steady_clock::duration::zero());
  EXPECT_LE(first_due, std::chrono::milliseconds(600));
  EXPECT_TRUE(in_flight.poll().empty());
  EXPECT_EQ(in_flight.finished(), 0);
  std::this_thread::sleep_for(first_due + std::chrono::milliseconds(1));
  EXPECT_TRUE(in_flight.poll().empty());  // the second piece is still running
  EXPECT_EQ(owner.completed, (std::vector<int>{1}));
  EXPECT_EQ(in_flight.finished(), 1);
  std::this_thread::sleep_for(in_flight.until_timed_done() + std::chrono::milliseconds(1));
  const std::vector<dist::Exchange*> idle = in_flight.poll();
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0], &owner);
  EXPECT_EQ(owner.completed, (std::vector<int>{1, 2}));
  EXPECT_EQ(in_flight.finished(), 2);
  EXPECT_EQ(in_flight.until_timed_done(), std::chrono::steady_clock::duration::max());
}

}  // namespace
}  // namespace poseidon::testing
