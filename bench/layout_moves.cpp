// Moves of NCHW activations, float32 and bfloat16, into and out of the
// channel blocks that oneDNN's convolutions run in (nChw16c with AVX-512,
// nChw8c with AVX2), by the conv layer's own transposes
// (layers/channel_transpose.h) and by oneDNN's reorders, timed in the same
// run, so bench/layout_moves.sh can print their ratio. The shapes are the
// activations of models/resnet_small.yaml and models/vgg_small.yaml at
// batch 64.
//
//   layout_moves_bench [rounds=41]
//
// Prints one line per shape, type and direction: median microseconds of
// both.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <vector>

#include "bench/median_time.h"
#include "layers/channel_transpose.h"
#include "layers/dnnl_support.h"

namespace {

using dnnl::memory;

// The layer's own moves of one element type: float32, or bfloat16 between
// bfloat16 tensors (words moved as they are).
struct F32Moves {
  using Element = float;
  static constexpr memory::data_type type = memory::data_type::f32;
  static constexpr const char* name = "f32";
  static void in(const float* plain, const poseidon::NhwcShape& s, float* blocked) {
    poseidon::nchw_to_nhwc(plain, s, blocked);
  }
  static void out(const float* blocked, const poseidon::NhwcShape& s, float* plain) {
    poseidon::nhwc_to_nchw(blocked, s, plain, false);
  }
};

struct Bf16Moves {
  using Element = uint16_t;
  static constexpr memory::data_type type = memory::data_type::bf16;
  static constexpr const char* name = "bf16";
  static void in(const uint16_t* plain, const poseidon::NhwcShape& s, uint16_t* blocked) {
    poseidon::nchw_bf16_to_nhwc_bf16(plain, s, blocked);
  }
  static void out(const uint16_t* blocked, const poseidon::NhwcShape& s, uint16_t* plain) {
    poseidon::nhwc_bf16_to_nchw_bf16(blocked, s, plain, false);
  }
};

// Times both ways of one shape and type and prints a line per direction.
template <class Moves>
void time_moves(const char* shape, const memory::dims& dims, memory::format_tag blocked_tag,
                const poseidon::NhwcShape& slabs, int rounds, dnnl::stream& stream) {
  using Element = typename Moves::Element;
  const dnnl::engine& engine = poseidon::dnnl_cpu_engine();
  // 1.0 in either type: float32's bits, or bfloat16's upper half of them.
  const Element one = sizeof(Element) == 4 ? Element(1) : Element(0x3f80);
  std::vector<Element> plain(dims[0] * dims[1] * dims[2] * dims[3], one), blocked(plain.size()), back(plain.size());
  memory plain_mem({dims, Moves::type, memory::format_tag::nchw}, engine, plain.data());
  memory blocked_mem({dims, Moves::type, blocked_tag}, engine, blocked.data());
  memory back_mem({dims, Moves::type, memory::format_tag::nchw}, engine, back.data());
  dnnl::reorder to_blocked(plain_mem, blocked_mem), to_plain(blocked_mem, back_mem);
  const double in_reorder = median_time<std::micro>(rounds, [&] {
    to_blocked.execute(stream, plain_mem, blocked_mem);
    stream.wait();
  });
  const double in_transpose = median_time<std::micro>(rounds, [&] { Moves::in(plain.data(), slabs, blocked.data()); });
  const double out_reorder = median_time<std::micro>(rounds, [&] {
    to_plain.execute(stream, blocked_mem, back_mem);
    stream.wait();
  });
  const double out_transpose = median_time<std::micro>(rounds, [&] { Moves::out(blocked.data(), slabs, back.data()); });
  std::printf("%-16s %-5s %-9s %10.0f %10.0f %8.2f\n", shape, Moves::name, "in", in_reorder, in_transpose,
              in_reorder / in_transpose);
  std::printf("%-16s %-5s %-9s %10.0f %10.0f %8.2f\n", shape, Moves::name, "out", out_reorder, out_transpose,
              out_reorder / out_transpose);
}

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
  std::printf("%-16s %-5s %-9s %10s %10s %8s\n", "shape", "type", "direction", "reorder", "transpose", "ratio");
  const int64_t shapes[][3] = {{64, 32, 32}, {64, 64, 16}, {64, 128, 8}, {64, 256, 4}};  // batch, channels, side
  for (const auto& [n, c, side] : shapes) {
    const NhwcShape slabs{.batch = n * c / block, .channels = block, .pixels = side * side};
    if (!nhwc_transpose_supported(slabs)) {
      std::printf("no AVX2 on this CPU: the layer keeps oneDNN's reorders\n");
      return 0;
    }
    const memory::dims dims = {n, c, side, side};
    char name[32];
    std::snprintf(name, sizeof name, "%lldx%lldx%lldx%lld", static_cast<long long>(n), static_cast<long long>(c),
                  static_cast<long long>(side), static_cast<long long>(side));
    time_moves<F32Moves>(name, dims, blocked_tag, slabs, rounds, stream);
    time_moves<Bf16Moves>(name, dims, blocked_tag, slabs, rounds, stream);
  }
  return 0;
}
