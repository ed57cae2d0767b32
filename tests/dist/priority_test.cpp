// dist/priority: held sends leave lowest priority value (lowest layer) first,
// then by sequence, with at most the window's bytes in flight; the parameter
// server's sequence sends each round's blocks as permutations of the ranks.
#include "dist/plan/priority.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
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

// Six ranks push a layer of 12 blocks, block b owned by rank b mod 6, each
// rank in its own ps_send_sequence order: the k-th sends of all ranks go to
// six different ranks (none to itself), and round 0's blocks all go before
// round 1's.
TEST(PsSendSequence, EachStepIsAPermutationOfTheRanks) {
  const int ranks = 6, blocks = 12;
  std::vector<std::vector<std::pair<int64_t, int>>> order(ranks);  // per rank: (sequence, block)
  for (int r = 0; r < ranks; ++r) {
    for (int b = 0; b < blocks; ++b)
      if (b % ranks != r) order[r].push_back({dist::ps_send_sequence(b, 100 + b, r, b % ranks, ranks), b});
    std::sort(order[r].begin(), order[r].end());
  }
  for (size_t k = 0; k < order[0].size(); ++k) {
    std::set<int> receivers;
    for (int r = 0; r < ranks; ++r) {
      const int b = order[r][k].second;
      EXPECT_EQ(b / ranks, static_cast<int>(k) / (ranks - 1)) << "rank " << r << " send " << k;
      receivers.insert(b % ranks);
    }
    EXPECT_EQ(receivers.size(), static_cast<size_t>(ranks)) << "send " << k;
  }
  // The owner's value sends of one block go to the other ranks, the next one first.
  std::vector<std::pair<int64_t, int>> values;
  for (int peer = 0; peer < ranks; ++peer)
    if (peer != 2) values.push_back({dist::ps_send_sequence(8, 108, 2, peer, ranks), peer});
  std::sort(values.begin(), values.end());
  std::vector<int> peers;
  for (const auto& v : values) peers.push_back(v.second);
  EXPECT_EQ(peers, (std::vector<int>{3, 4, 5, 0, 1}));
}

}  // namespace poseidon::testing
