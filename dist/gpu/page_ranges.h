// Which pages of a host buffer are still to be pinned. cudaHostRegister
// pins whole pages and refuses a range that shares a page with one pinned
// already, whole: a blob whose first page it shares with a neighbour would
// stay pageable, and every copy of it would hold the host. So the staging
// streams keep the pages pinned so far and register only the gaps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

namespace poseidon::dist {

// Disjoint, page-aligned address ranges: first page's address -> the end.
using PageRanges = std::map<uintptr_t, uintptr_t>;

// The page-aligned pieces of the pages that [address, address + bytes)
// touches that `pinned` does not hold, in address order.
inline std::vector<std::pair<uintptr_t, uintptr_t>> unpinned_pages(const PageRanges& pinned, uintptr_t address,
                                                                   size_t bytes, uintptr_t page) {
  std::vector<std::pair<uintptr_t, uintptr_t>> gaps;
  if (bytes == 0) return gaps;
  const uintptr_t end = (address + bytes + page - 1) / page * page;
  uintptr_t at = address / page * page;
  auto next = pinned.upper_bound(at);
  // A range that begins at or before `at` may cover its start.
  if (next != pinned.begin() && std::prev(next)->second > at) at = std::prev(next)->second;
  for (; at < end; ++next) {
    const uintptr_t gap_end = next != pinned.end() && next->first < end ? next->first : end;
    if (gap_end > at) gaps.emplace_back(at, gap_end);
    if (next == pinned.end()) break;
    at = next->second;
  }
  return gaps;
}

}  // namespace poseidon::dist
