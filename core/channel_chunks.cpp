// The chunk geometry of the per-channel reductions (see channel_chunks.h).
#include "core/channel_chunks.h"

namespace poseidon {

namespace {

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

ChannelChunks cut_channels(size_t outer, size_t channels, size_t inner, size_t least, size_t max_chunks,
                           size_t stride) {
  ChannelChunks c;
  c.outer = outer;
  c.channels = channels;
  c.inner = inner;
  const size_t n = c.per_channel();
  if (n == 0) return c;
  size_t chunks = ceil_div(n, least);
  if (chunks > max_chunks) chunks = max_chunks;
  c.chunk = ceil_div(ceil_div(n, chunks), stride) * stride;
  c.chunks = ceil_div(n, c.chunk);
  return c;
}

}  // namespace poseidon
