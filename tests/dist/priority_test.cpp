// dist/priority: held sends leave lowest priority value (lowest layer) first,
// then by sequence, with at most the window's bytes in flight.
#include "dist/priority.h"

#include <gtest/gtest.h>

#include <vector>

namespace poseidon::testing {

TEST(PrioritySends, LowestLayerFirstWithinTheWindow) {
  dist::PrioritySends sends(/*window_bytes=*/100);
  std::vector<int> posted;
  auto submit = [&](int64_t priority, int64_t sequence, int64_t bytes, int id) {
    sends.submit(priority, sequence, bytes, [&posted, id] { posted.push_back(id); });
  };
  // Backward order: the top layer (priority 5) is reported first.
  submit(5, 0, 60, 1);
  submit(5, 1, 60, 2);
  sends.pump();
  EXPECT_EQ(posted, (std::vector<int>{1}));  // a second 60 would exceed the window
  submit(0, 7, 30, 3);
  submit(0, 6, 30, 4);
  sends.pump();
  EXPECT_EQ(posted, (std::vector<int>{1, 4}));  // the lowest layer overtakes; 60 + 30 + 30 would not fit
  sends.sent(60);
  sends.pump();
  EXPECT_EQ(posted, (std::vector<int>{1, 4, 3}));  // 30 + 30 in flight, 60 more would not fit
  sends.sent(30);
  sends.pump();
  EXPECT_EQ(posted, (std::vector<int>{1, 4, 3, 2}));
  EXPECT_TRUE(sends.empty());
}

TEST(PrioritySends, ALargeSendGoesAloneWhenNothingIsInFlight) {
  dist::PrioritySends sends(10);
  int posted = 0;
  sends.submit(0, 0, 1000, [&] { ++posted; });
  sends.submit(0, 1, 1, [&] { ++posted; });
  sends.pump();
  EXPECT_EQ(posted, 1);
  sends.sent(1000);
  sends.pump();
  EXPECT_EQ(posted, 2);
}

}  // namespace poseidon::testing
