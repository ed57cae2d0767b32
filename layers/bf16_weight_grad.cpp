// Small-batch bf16 weight gradient on AMX (see bf16_weight_grad.h): both
// operands regrouped into bfloat16 pairs along the batch, which is the
// layout AMX's tiles multiply, then tiles of 16 x 16 outputs, two by two,
// each written once, streamed past the cache where dW is aligned.
#include "layers/bf16_weight_grad.h"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define POSEIDON_AMX_WEIGHT_GRAD 1
#endif

namespace poseidon {

namespace {

constexpr int64_t kTile = 16;  // rows of dW (outputs) and columns (features) per tile

uint32_t pair(uint16_t low, uint16_t high) { return uint32_t{low} | uint32_t{high} << 16; }

#ifdef POSEIDON_AMX_WEIGHT_GRAD
#define POSEIDON_AMX __attribute__((target("avx512f,amx-tile,amx-bf16")))

// AMX's tile configuration (palette 1): tiles 0-3 accumulate 16 x 16 float32
// outputs, 4-5 hold 16 rows of dy pairs, 6-7 `pairs` rows of 16 x pairs.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

TileConfig tile_config(int64_t pairs) {
  TileConfig c;
  for (int t = 0; t < 4; ++t) c.bytes_per_row[t] = 64, c.rows[t] = kTile;
  for (int t = 4; t < 6; ++t) c.bytes_per_row[t] = static_cast<uint16_t>(pairs * 4), c.rows[t] = kTile;
  for (int t = 6; t < 8; ++t) c.bytes_per_row[t] = 64, c.rows[t] = static_cast<uint8_t>(pairs);
  return c;
}

// One accumulated tile out to dW's rows o0.., columns f0.., those inside.
template <bool kStream>
POSEIDON_AMX void write_tile(const float (&tile)[kTile][kTile], float* dw, int64_t features, int64_t outputs,
                             int64_t o0, int64_t f0) {
  const int64_t rows = std::min(kTile, outputs - o0), cols = std::clamp<int64_t>(features - f0, 0, kTile);
  if (cols == 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    const __m512 v = _mm512_load_ps(tile[r]);
    float* at = dw + (o0 + r) * features + f0;
    if (kStream && cols == kTile)
      _mm512_stream_ps(at, v);
    else
      _mm512_mask_storeu_ps(at, static_cast<__mmask16>((1u << cols) - 1u), v);
  }
}

template <bool kStream>
POSEIDON_AMX void weight_grad(const uint32_t* dy_pairs, const uint32_t* x_pairs, int64_t pairs, int64_t padded_outputs,
                              int64_t padded_features, int64_t features, int64_t outputs, float* dw) {
  const TileConfig config = tile_config(pairs);
  const int64_t row_blocks = padded_outputs / (2 * kTile), column_blocks = padded_features / (2 * kTile);
  const int64_t a_stride = pairs * 4, b_stride = padded_features * 4;
#pragma omp parallel if (outputs * features > 65536)
  {
    _tile_loadconfig(&config);
    alignas(64) float tile[kTile][kTile];
#pragma omp for collapse(2) schedule(static) nowait
    for (int64_t rb = 0; rb < row_blocks; ++rb)
      for (int64_t cb = 0; cb < column_blocks; ++cb) {
        const int64_t o0 = rb * 2 * kTile, f0 = cb * 2 * kTile;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        _tile_loadd(4, dy_pairs + o0 * pairs, a_stride);
        _tile_loadd(5, dy_pairs + (o0 + kTile) * pairs, a_stride);
        _tile_loadd(6, x_pairs + f0, b_stride);
        _tile_loadd(7, x_pairs + f0 + kTile, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        _tile_stored(0, tile, 64);
        write_tile<kStream>(tile, dw, features, outputs, o0, f0);
        _tile_stored(1, tile, 64);
        write_tile<kStream>(tile, dw, features, outputs, o0, f0 + kTile);
        _tile_stored(2, tile, 64);
        write_tile<kStream>(tile, dw, features, outputs, o0 + kTile, f0);
        _tile_stored(3, tile, 64);
        write_tile<kStream>(tile, dw, features, outputs, o0 + kTile, f0 + kTile);
      }
    _tile_release();
    // Streaming stores are ordered only by a fence: before the threads meet.
    if constexpr (kStream) _mm_sfence();
  }
}

// Linux hands AMX's tile state to a process only on request.
bool amx_permitted() {
  constexpr int kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr int kTileData = 18;               // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}
#endif

}  // namespace

bool Bf16WeightGrad::supported() {
#ifdef POSEIDON_AMX_WEIGHT_GRAD
  static const bool cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("amx-tile") &&
                          __builtin_cpu_supports("amx-bf16") && amx_permitted();
  return cpu;
#else
  return false;
#endif
}

Bf16WeightGrad::Bf16WeightGrad(int64_t batch, int64_t features, int64_t outputs)
    : batch_(batch),
      features_(features),
      outputs_(outputs),
      pairs_((batch + 1) / 2),
      padded_outputs_((outputs + 2 * kTile - 1) / (2 * kTile) * (2 * kTile)),
      padded_features_((features + 2 * kTile - 1) / (2 * kTile) * (2 * kTile)),
      dy_pairs_(padded_outputs_ * pairs_, 0),
      x_pairs_(pairs_ * padded_features_, 0) {}

void Bf16WeightGrad::run(const uint16_t* dy, const uint16_t* x, float* dw) {
#ifdef POSEIDON_AMX_WEIGHT_GRAD
  auto at = [&](const uint16_t* matrix, int64_t cols, int64_t n, int64_t c) -> uint16_t {
    return n < batch_ ? matrix[n * cols + c] : 0;
  };
#pragma omp parallel for schedule(static) if (outputs_ * pairs_ > 65536)
  for (int64_t o = 0; o < outputs_; ++o)
    for (int64_t m = 0; m < pairs_; ++m)
      dy_pairs_[o * pairs_ + m] = pair(at(dy, outputs_, 2 * m, o), at(dy, outputs_, 2 * m + 1, o));
#pragma omp parallel for collapse(2) schedule(static) if (pairs_ * features_ > 65536)
  for (int64_t m = 0; m < pairs_; ++m)
    for (int64_t f = 0; f < features_; ++f)
      x_pairs_[m * padded_features_ + f] = pair(at(x, features_, 2 * m, f), at(x, features_, 2 * m + 1, f));
  const bool aligned = reinterpret_cast<uintptr_t>(dw) % 64 == 0 && features_ % kTile == 0;
  if (aligned)
    weight_grad<true>(dy_pairs_.data(), x_pairs_.data(), pairs_, padded_outputs_, padded_features_, features_, outputs_,
                      dw);
  else
    weight_grad<false>(dy_pairs_.data(), x_pairs_.data(), pairs_, padded_outputs_, padded_features_, features_,
                       outputs_, dw);
#else
  (void)dy, (void)x, (void)dw;
#endif
}

}  // namespace poseidon
