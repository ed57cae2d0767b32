// Moves of NCHW float32 activations into and out of the channel blocks that
// oneDNN's convolutions run in (nChw16c with AVX-512, nChw8c with AVX2), by
// the conv layer's own transposes (layers/channel_transpose.h) and by
// oneDNN's reorders, timed in the same run, so bench/layout_moves.sh can
// print their ratio. The shapes are the activations of
// models/resnet_small.yaml and models/vgg_small.yaml at batch 64.
//
//   layout_moves_bench [rounds=41]
//
// Prints one line per shape and direction: median microseconds of both.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <vector>

#include "bench/median_time.h"
#include "layers/channel_transpose.h"
#include "layers/dnnl_support.h"

namespace {

using dnnl::memory;

}  // namespace

int main(int argc, char** argv) {
  using namespace poseidon;
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 41;
  const int64_t block = dnnl_uses_avx512() ? 16 : 8;  // the blocks oneDNN's convolutions pick
  const memory::format_tag blocked_tag = block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
  const dnnl::engine& engine = dnnl_cpu_engine();
  dnnl::stream stream(engine);
  std::printf("blocks of %lld channels, median of %d moves each, microseconds\n", static_cast<long long>(block),
              rounds);
  std::printf("%-16s %-9s %10s %10s %8s\n", "shape", "direction", "reorder", "transpose", "ratio");
  const int64_t shapes[][3] = {{64, 32, 32}, {64, 64, 16}, {64, 128, 8}, {64, 256, 4}};  // batch, channels, side
  for (const auto& [n, c, side] : shapes) {
    const NhwcShape slabs{.batch = n * c / block, .channels = block, .pixels = side * side};
    if (!nhwc_transpose_supported(slabs)) {
      std::printf("no AVX2 on this CPU: the layer keeps oneDNN's reorders\n");
      return 0;
    }
    const memory::dims dims = {n, c, side, side};
    std::vector<float> plain(n * c * side * side, 1.f), blocked(plain.size()), back(plain.size());
    memory plain_mem({dims, memory::data_type::f32, memory::format_tag::nchw}, engine, plain.data());
    memory blocked_mem({dims, memory::data_type::f32, blocked_tag}, engine, blocked.data());
    memory back_mem({dims, memory::data_type::f32, memory::format_tag::nchw}, engine, back.data());
    dnnl::reorder to_blocked(plain_mem, blocked_mem), to_plain(blocked_mem, back_mem);
    const double in_reorder = median_time<std::micro>(rounds, [&] {
      to_blocked.execute(stream, plain_mem, blocked_mem);
      stream.wait();
    });
    const double in_transpose = median_time<std::micro>(rounds, [&] { nchw_to_nhwc(plain.data(), slabs, blocked.data()); });
    const double out_reorder = median_time<std::micro>(rounds, [&] {
      to_plain.execute(stream, blocked_mem, back_mem);
      stream.wait();
    });
    const double out_transpose = median_time<std::micro>(rounds, [&] { nhwc_to_nchw(blocked.data(), slabs, back.data(), false); });
    char name[32];
    std::snprintf(name, sizeof name, "%lldx%lldx%lldx%lld", static_cast<long long>(n), static_cast<long long>(c),
                  static_cast<long long>(side), static_cast<long long>(side));
    std::printf("%-16s %-9s %10.0f %10.0f %8.2f\n", name, "in", in_reorder, in_transpose, in_reorder / in_transpose);
    std::printf("%-16s %-9s %10.0f %10.0f %8.2f\n", name, "out", out_reorder, out_transpose,
                out_reorder / out_transpose);
  }
  return 0;
}
