// The GPU channel sums' division-free walk (core/channel_walk.h) visits, for
// every thread of a block, exactly the elements, in the same order, that
// the flat index t = start, start + step, ... split by t / inner and
// t % inner would: so the sums keep their values bit for bit. Shapes cover
// inner 1 (fc), inner below, equal to and above the step, and steps that
// are and are not multiples of inner.
#include "core/channel_walk.h"

#include <gtest/gtest.h>

#include <vector>

namespace poseidon {
namespace {

TEST(ChannelWalk, VisitsWhatDividingEveryIndexWould) {
  struct Case {
    size_t outer, channels, inner, step;
  };
  for (const Case& k : std::vector<Case>{{37, 3, 1, 8}, {5, 4, 3, 8}, {3, 2, 8, 8}, {4, 3, 49, 8}, {2, 5, 20, 6},
                                         {7, 1, 1000, 256}, {9, 2, 256, 256}, {1, 1, 3, 256}})
    for (size_t start = 0; start < k.step; ++start)
      for (size_t c = 0; c < k.channels; ++c) {
        std::vector<size_t> want, got;
        for (size_t t = start; t < k.outer * k.inner; t += k.step)
          want.push_back((t / k.inner * k.channels + c) * k.inner + t % k.inner);
        for (ChannelWalk w(start, k.step, k.inner); w.inside(k.outer); w.next()) got.push_back(w.offset(c, k.channels));
        ASSERT_EQ(got, want) << "outer " << k.outer << " inner " << k.inner << " step " << k.step << " start "
                             << start << " channel " << c;
      }
}

}  // namespace
}  // namespace poseidon
