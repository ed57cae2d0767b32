// Building each rank's all-reduce steps (see allreduce_schedule.h).
#include "dist/schemes/allreduce_schedule.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace poseidon::dist {

namespace {

struct Range {
  int64_t begin = 0, count = 0;
};

// The c-th of `parts` near-equal chunks of `r`.
Range chunk(Range r, int parts, int c) {
  const int64_t base = r.count / parts, extra = r.count % parts;
  return {r.begin + c * base + std::min<int64_t>(c, extra), base + (c < extra ? 1 : 0)};
}

int mod(int a, int m) { return (a % m + m) % m; }

// Appends one rank's steps; `tag` runs over every step of the schedule, the
// same count on every rank of a group.
struct Builder {
  std::vector<ScheduleStep>& out;
  int tag = 0;

  void step(int to, Range sent, int from, Range received, bool add, float scale) {
    ScheduleStep s;
    s.tag = tag;
    s.send_to = to;
    s.send_begin = sent.begin;
    s.send_count = sent.count;
    s.receive_from = from;
    s.receive_begin = received.begin;
    s.receive_count = received.count;
    s.add = add;
    s.scale = scale;
    out.push_back(s);
  }

  // Returns the chunk member `me` holds summed afterwards.
  Range ring_reduce_scatter(const std::vector<int>& group, int me, Range r, float scale) {
    const int m = static_cast<int>(group.size());
    for (int s = 0; s < m - 1; ++s, ++tag)
      step(group[mod(me + 1, m)], chunk(r, m, mod(me - s, m)), group[mod(me - 1, m)], chunk(r, m, mod(me - s - 1, m)),
           true, s == m - 2 ? scale : 1.f);
    return chunk(r, m, mod(me + 1, m));
  }

  void ring_all_gather(const std::vector<int>& group, int me, Range r) {
    const int m = static_cast<int>(group.size());
    for (int t = 0; t < m - 1; ++t, ++tag)
      step(group[mod(me + 1, m)], chunk(r, m, mod(me + 1 - t, m)), group[mod(me - 1, m)], chunk(r, m, mod(me - t, m)),
           false, 1.f);
  }

  void halving_doubling(const std::vector<int>& group, int me, Range r, float scale) {
    const int m = static_cast<int>(group.size());
    if (m < 2) return;
    int p2 = 1;
    while (p2 * 2 <= m) p2 *= 2;
    const bool extras = p2 < m;
    if (extras) {
      if (me >= p2) step(group[me - p2], r, -1, {}, false, 1.f);
      if (me < m - p2) step(-1, {}, group[me + p2], r, true, 1.f);
      ++tag;
    }
    int levels = 0;
    for (int d = 1; d < p2; d *= 2) ++levels;
    if (me < p2) {
      std::vector<std::pair<Range, Range>> kept_sent;
      Range current = r;
      int level = 0;
      for (int d = 1; d < p2; d *= 2, ++level) {
        const Range lower{current.begin, current.count / 2};
        const Range upper{current.begin + lower.count, current.count - lower.count};
        const bool low = (me & d) == 0;
        const Range keep = low ? lower : upper, give = low ? upper : lower;
        const int partner = group[me ^ d];
        step(partner, give, partner, keep, true, level == levels - 1 ? scale : 1.f);
        out.back().tag = tag + level;
        kept_sent.emplace_back(keep, give);
        current = keep;
      }
      level = 0;
      int d = p2 / 2;
      for (auto it = kept_sent.rbegin(); it != kept_sent.rend(); ++it, ++level, d /= 2) {
        step(group[me ^ d], it->first, group[me ^ d], it->second, false, 1.f);
        out.back().tag = tag + levels + level;
      }
    }
    tag += 2 * levels;
    if (extras) {
      if (me < m - p2) step(group[me + p2], r, -1, {}, false, 1.f);
      if (me >= p2) step(-1, {}, group[me - p2], r, false, 1.f);
      ++tag;
    }
  }
};

std::vector<int> all(int ranks) {
  std::vector<int> g(ranks);
  for (int i = 0; i < ranks; ++i) g[i] = i;
  return g;
}

}  // namespace

std::vector<ScheduleStep> allreduce_schedule(AllreduceAlgorithm algorithm, int64_t count, int ranks, int rank,
                                             int per_host) {
  POSEIDON_CHECK(ranks >= 1 && rank >= 0 && rank < ranks && count >= 0) << ranks << " " << rank << " " << count;
  std::vector<ScheduleStep> out;
  Builder b{out};
  const Range whole{0, count};
  const float average = 1.f / static_cast<float>(ranks);
  switch (algorithm) {
    case AllreduceAlgorithm::ring:
      if (ranks > 1) {
        b.ring_reduce_scatter(all(ranks), rank, whole, average);
        b.ring_all_gather(all(ranks), rank, whole);
      }
      break;
    case AllreduceAlgorithm::halving_doubling:
      b.halving_doubling(all(ranks), rank, whole, average);
      break;
    case AllreduceAlgorithm::two_level: {
      if (per_host < 1 || ranks % per_host != 0)
        throw Error("two_level all-reduce needs whole hosts: " + std::to_string(ranks) + " ranks, " +
                    std::to_string(per_host) + " per host");
      const int hosts = ranks / per_host, host = rank / per_host, local = rank % per_host;
      std::vector<int> inside, across;
      for (int i = 0; i < per_host; ++i) inside.push_back(host * per_host + i);
      for (int h = 0; h < hosts; ++h) across.push_back(h * per_host + local);
      const Range slice = b.ring_reduce_scatter(inside, local, whole, hosts == 1 ? average : 1.f);
      if (hosts > 1) b.halving_doubling(across, host, slice, average);
      b.ring_all_gather(inside, local, whole);
      break;
    }
    case AllreduceAlgorithm::automatic:
      throw Error("an all-reduce schedule needs a concrete algorithm, not auto");
  }
  return out;
}

}  // namespace poseidon::dist
