// Small-batch weight gradients (see small_batch_weight_grad.h). In bf16 both
// operands are regrouped into bfloat16 pairs along the batch, which is the
// layout AMX's tiles multiply, then tiles of 16 x 16 outputs, two by two, are
// each written once; in float32 blocks of 4 rows by 64 columns accumulate in
// 16 registers. Both stream dW past the cache where it is aligned.
#include "layers/small_batch_weight_grad.h"

#include <algorithm>
#include <cstdint>

#include "layers/avx512_tiles.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define POSEIDON_X86_WEIGHT_GRAD 1
#endif

namespace poseidon {

namespace {

constexpr int64_t kTile = 16;  // rows of dW (outputs) and columns (features) per tile

uint32_t pair(uint16_t low, uint16_t high) { return uint32_t{low} | uint32_t{high} << 16; }

#ifdef POSEIDON_X86_WEIGHT_GRAD
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
    store_lanes<kStream>(dw + (o0 + r) * features + f0, _mm512_load_ps(tile[r]), first_lanes(cols));
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

// One row of dW, columns f0 .. f0 + 63 (those inside): the accumulators are
// named variables, which GCC keeps in registers where it spilled an array of
// them on every step of the batch.
struct F32Row {
  __m512 c0, c1, c2, c3;
};

// dW's rows o0 .. o0 + Rows - 1 (Rows 1 or 4), columns f0 .. f0 + 63; with
// kFull all 64 columns lie inside, and the loads need no masks.
template <int64_t Rows, bool kStream, bool kFull>
__attribute__((target("avx512f"))) void f32_block(const float* dy, const float* x, int64_t batch, int64_t features,
                                                  int64_t outputs, int64_t o0, int64_t f0, float* dw) {
  __mmask16 mask[4];
  for (int64_t v = 0; v < 4; ++v) mask[v] = first_lanes(std::clamp<int64_t>(features - f0 - 16 * v, 0, 16));
  const __m512 zero = _mm512_setzero_ps();
  F32Row r0{zero, zero, zero, zero}, r1 = r0, r2 = r0, r3 = r0;
  auto step = [](F32Row & r, __m512 a, __m512 b0, __m512 b1, __m512 b2, __m512 b3) __attribute__((target("avx512f"))) {
    r.c0 = _mm512_fmadd_ps(a, b0, r.c0);
    r.c1 = _mm512_fmadd_ps(a, b1, r.c1);
    r.c2 = _mm512_fmadd_ps(a, b2, r.c2);
    r.c3 = _mm512_fmadd_ps(a, b3, r.c3);
  };
  auto load = [&](const float* at, int64_t v) __attribute__((target("avx512f"))) {
    return kFull ? _mm512_loadu_ps(at) : _mm512_maskz_loadu_ps(mask[v], at);
  };
  for (int64_t n = 0; n < batch; ++n) {
    const float* xn = x + n * features + f0;
    const __m512 b0 = load(xn, 0), b1 = load(xn + 16, 1), b2 = load(xn + 32, 2), b3 = load(xn + 48, 3);
    const float* a = dy + n * outputs + o0;
    step(r0, _mm512_set1_ps(a[0]), b0, b1, b2, b3);
    if constexpr (Rows == 4) {
      step(r1, _mm512_set1_ps(a[1]), b0, b1, b2, b3);
      step(r2, _mm512_set1_ps(a[2]), b0, b1, b2, b3);
      step(r3, _mm512_set1_ps(a[3]), b0, b1, b2, b3);
    }
  }
  auto write = [&](const F32Row& r, int64_t row) __attribute__((target("avx512f"))) {
    float* at = dw + (o0 + row) * features + f0;
    const __m512 values[4] = {r.c0, r.c1, r.c2, r.c3};
    for (int64_t v = 0; v < 4; ++v) store_lanes<kStream>(at + 16 * v, values[v], mask[v]);
  };
  write(r0, 0);
  if constexpr (Rows == 4) {
    write(r1, 1);
    write(r2, 2);
    write(r3, 3);
  }
}

// Column chunk by column chunk, so that x's part (at most 32 x 1024 floats)
// stays in cache while every row block reads it (VGG19's classifier.0 has x
// of 32 x 25088, more than a core's cache).
template <bool kStream>
__attribute__((target("avx512f"))) void f32_grad(const float* dy, const float* x, int64_t batch, int64_t features,
                                                 int64_t outputs, float* dw) {
  constexpr int64_t kRows = 4, kColumns = 64, kChunkColumns = 1024;
  const int64_t row_blocks = (outputs + kRows - 1) / kRows;
  for (int64_t chunk = 0; chunk < features; chunk += kChunkColumns) {
    const int64_t column_blocks = (std::min(kChunkColumns, features - chunk) + kColumns - 1) / kColumns;
#pragma omp parallel if (outputs * features > 65536)
    {
#pragma omp for collapse(2) schedule(static) nowait
      for (int64_t rb = 0; rb < row_blocks; ++rb)
        for (int64_t cb = 0; cb < column_blocks; ++cb) {
          const int64_t o0 = rb * kRows, f0 = chunk + cb * kColumns;
          const bool full = f0 + kColumns <= features;
          if (o0 + kRows <= outputs && full)
            f32_block<kRows, kStream, true>(dy, x, batch, features, outputs, o0, f0, dw);
          else if (o0 + kRows <= outputs)
            f32_block<kRows, kStream, false>(dy, x, batch, features, outputs, o0, f0, dw);
          else
            for (int64_t o = o0; o < outputs; ++o)
              f32_block<1, kStream, false>(dy, x, batch, features, outputs, o, f0, dw);
        }
      if constexpr (kStream) _mm_sfence();
    }
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

bool f32_weight_grad_supported() {
#ifdef POSEIDON_X86_WEIGHT_GRAD
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu;
#else
  return false;
#endif
}

void f32_weight_grad(const float* dy, const float* x, int64_t batch, int64_t features, int64_t outputs, float* dw) {
#ifdef POSEIDON_X86_WEIGHT_GRAD
  if (reinterpret_cast<uintptr_t>(dw) % 64 == 0 && features % 16 == 0)
    f32_grad<true>(dy, x, batch, features, outputs, dw);
  else
    f32_grad<false>(dy, x, batch, features, outputs, dw);
#else
  (void)dy, (void)x, (void)batch, (void)features, (void)outputs, (void)dw;
#endif
}

bool Bf16WeightGrad::supported() {
#ifdef POSEIDON_X86_WEIGHT_GRAD
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
#ifdef POSEIDON_X86_WEIGHT_GRAD
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
