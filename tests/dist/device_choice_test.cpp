// dist/device_choice: one GPU per rank for `device: cuda`, the named GPU for
// `device: cuda:N`, and a clear refusal when a host has too few GPUs.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "dist/runtime/device_choice.h"

namespace poseidon::testing {

TEST(RankDevice, TheLocalRankPicksTheGpu) {
  for (int local = 0; local < 4; ++local)
    EXPECT_EQ(dist::rank_device(Device::cuda(), false, local, 4, 8, "node1"), Device::cuda(local));
}

TEST(RankDevice, ANamedGpuIsSharedOnPurpose) {
  EXPECT_EQ(dist::rank_device(Device::cuda(0), true, 1, 2, 1, "node1"), Device::cuda(0));
  EXPECT_EQ(dist::rank_device(Device::cuda(3), true, 0, 8, 1, "node1"), Device::cuda(3));
}

TEST(RankDevice, TheCpuAndALoneRankAreLeftAsAsked) {
  EXPECT_EQ(dist::rank_device(Device{}, false, 3, 4, 0, "node1"), Device{});
  EXPECT_EQ(dist::rank_device(Device::cuda(), false, 0, 1, 1, "node1"), Device::cuda(0));
}

TEST(RankDevice, MoreRanksThanGpusOnAHostIsAnError) {
  try {
    dist::rank_device(Device::cuda(), false, 2, 3, 2, "node7");
    FAIL() << "three ranks were given two GPUs";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node7 runs 3 ranks and has 2 GPU(s)"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
  }
}

}  // namespace poseidon::testing
