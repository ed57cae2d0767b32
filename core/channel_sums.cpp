// The channel sums' plan and their CPU reference (see channel_sums.h).
#include "core/channel_sums.h"

#include <vector>

#include "core/bf16.h"

namespace poseidon {

namespace {

// The plan's sums, reading value v of the tensor as load(v).
template <class Load>
void sums_in_plan_order(float* sums, const ChannelSumsPlan& p, Load load) {
  constexpr size_t kThreads = ChannelSumsPlan::kThreads;
  std::vector<float> shares(kThreads);
  // Channel c's value at flat position pos (i = pos / inner, j = pos % inner).
  auto value = [&](size_t c, size_t pos) { return load((pos / p.inner * p.channels + c) * p.inner + pos % p.inner); };
  for (size_t c = 0; c < p.channels; ++c) {
    float total = 0.f;
    for (size_t k = 0; k < p.chunks; ++k) {
      float partial = 0.f;
      if (p.strided) {
        for (size_t t = 0; t < kThreads; ++t) {
          float share = 0.f;
          for (size_t pos = p.begin(k) + t; pos < p.end(k); pos += kThreads) share += value(c, pos);
          shares[t] = share;
        }
        for (size_t half = kThreads / 2; half > 0; half /= 2)
          for (size_t t = 0; t < half; ++t) shares[t] += shares[t + half];
        partial = shares[0];
      } else {
        for (size_t pos = p.begin(k); pos < p.end(k); ++pos) partial += value(c, pos);
      }
      total = k == 0 ? partial : total + partial;
    }
    sums[c] = total;
  }
}

}  // namespace

ChannelSumsPlan plan_channel_sums(size_t outer, size_t channels, size_t inner) {
  ChannelSumsPlan p;
  p.strided = inner > 1;
  const size_t least =
      p.strided ? ChannelSumsPlan::kThreads * ChannelSumsPlan::kValuesPerThread : ChannelSumsPlan::kRowsPerChunk;
  static_cast<ChannelChunks&>(p) = cut_channels(outer, channels, inner, least, ChannelSumsPlan::kMaxChunks,
                                                p.strided ? ChannelSumsPlan::kThreads : 1);
  return p;
}

void channel_sums_reference(float* sums, const float* x, const ChannelSumsPlan& plan) {
  sums_in_plan_order(sums, plan, [x](size_t i) { return x[i]; });
}

void channel_sums_reference(float* sums, const uint16_t* x, const ChannelSumsPlan& plan) {
  sums_in_plan_order(sums, plan, [x](size_t i) { return from_bf16(x[i]); });
}

}  // namespace poseidon
