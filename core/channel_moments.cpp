// The channel moments' plan and their CPU reference (see channel_moments.h).
#include "core/channel_moments.h"

#include <vector>

namespace poseidon {

namespace {

// The pieces' moments joined in the tree of the plan: shares[t] =
// merge(shares[t], shares[t + half]) for half = size / 2 down to 1.
Moments tree(std::vector<Moments>& shares) {
  for (size_t half = shares.size() / 2; half > 0; half /= 2)
    for (size_t t = 0; t < half; ++t) shares[t] = merge_moments(shares[t], shares[t + half]);
  return shares[0];
}

}  // namespace

ChannelMomentsPlan plan_channel_moments(size_t outer, size_t channels, size_t inner) {
  constexpr size_t kThreads = ChannelMomentsPlan::kThreads;
  ChannelMomentsPlan p;
  static_cast<ChannelChunks&>(p) =
      cut_channels(outer, channels, inner, kThreads * ChannelMomentsPlan::kGroup, ChannelMomentsPlan::kMaxChunks, kThreads);
  return p;
}

void channel_moments_reference(Moments* moments, const float* x, const ChannelMomentsPlan& p) {
  std::vector<Moments> shares(ChannelMomentsPlan::kThreads), lanes(ChannelMomentsPlan::kLanes);
  std::vector<Moments> partials(p.chunks);
  for (size_t c = 0; c < p.channels; ++c) {
    for (size_t k = 0; k < p.chunks; ++k) {
      for (size_t t = 0; t < shares.size(); ++t) shares[t] = thread_moments(p, x, c, k, t);
      partials[k] = tree(shares);
    }
    if (p.chunks == 0) {
      moments[c] = {0, 0, 0};
    } else if (p.chunks == 1) {
      moments[c] = partials[0];
    } else {
      for (size_t l = 0; l < lanes.size(); ++l) lanes[l] = lane_moments(p, partials.data(), l);
      moments[c] = tree(lanes);
    }
  }
}

}  // namespace poseidon
