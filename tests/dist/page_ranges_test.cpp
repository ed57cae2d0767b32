// The pages a pin still has to register (dist/gpu/page_ranges.h): only the
// gaps between the pages pinned before, page-aligned, in address order.
#include "dist/gpu/page_ranges.h"

#include <gtest/gtest.h>

namespace poseidon::dist {
namespace {

using Gaps = std::vector<std::pair<uintptr_t, uintptr_t>>;
constexpr uintptr_t kPage = 4096;

TEST(PageRanges, NothingPinnedGivesTheTouchedPagesWhole) {
  EXPECT_EQ(unpinned_pages({}, 10 * kPage + 100, 2 * kPage, kPage), (Gaps{{10 * kPage, 13 * kPage}}));
  EXPECT_EQ(unpinned_pages({}, 10 * kPage, kPage, kPage), (Gaps{{10 * kPage, 11 * kPage}}));
  EXPECT_TRUE(unpinned_pages({}, 10 * kPage, 0, kPage).empty());
}

TEST(PageRanges, APageSharedWithANeighbourIsLeftOut) {
  // A blob pinned on pages 10 to 12; the next one starts inside page 12.
  const PageRanges pinned{{10 * kPage, 13 * kPage}};
  EXPECT_EQ(unpinned_pages(pinned, 12 * kPage + 64, 3 * kPage, kPage), (Gaps{{13 * kPage, 16 * kPage}}));
  // And one that ends inside page 10.
  EXPECT_EQ(unpinned_pages(pinned, 8 * kPage + 8, 2 * kPage, kPage), (Gaps{{8 * kPage, 10 * kPage}}));
  // Wholly inside: nothing left.
  EXPECT_TRUE(unpinned_pages(pinned, 11 * kPage + 5, 100, kPage).empty());
}

TEST(PageRanges, GapsBetweenSeveralPinnedRanges) {
  const PageRanges pinned{{2 * kPage, 4 * kPage}, {6 * kPage, 7 * kPage}, {9 * kPage, 20 * kPage}};
  EXPECT_EQ(unpinned_pages(pinned, 1 * kPage + 1, 10 * kPage, kPage),
            (Gaps{{1 * kPage, 2 * kPage}, {4 * kPage, 6 * kPage}, {7 * kPage, 9 * kPage}}));
  // Starting inside a pinned range and ending past the last one.
  EXPECT_EQ(unpinned_pages(pinned, 3 * kPage, 20 * kPage, kPage),
            (Gaps{{4 * kPage, 6 * kPage}, {7 * kPage, 9 * kPage}, {20 * kPage, 23 * kPage}}));
}

}  // namespace
}  // namespace poseidon::dist
