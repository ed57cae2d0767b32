// CPU pooling loops (see pool_kernels.h). Whole output rows at a time: for
// each input row and kernel column of an output row, one loop over the
// outputs that read real input, free of dependencies so that it vectorises.
#include "layers/pool_kernels.h"

#include <algorithm>
#include <limits>

#include "layers/cpu_vector.h"
#include "layers/pool_max_simd.h"

namespace poseidon {
namespace {

// Calls visit(iy, offset, lo, hi) for each input row iy and kernel column of
// output row oy, in the row-major tap order PyTorch scans a window in:
// outputs ox in [lo, hi) read input column ox * stride + offset of row iy.
template <class Fn>
inline void for_each_tap_row(const PoolGeometry& g, int64_t oy, Fn visit) {
  const int64_t y0 = oy * g.stride[0] - g.pad[0];
  const int64_t y1 = std::min(y0 + g.kernel[0], g.in_h);
  for (int64_t iy = std::max<int64_t>(y0, 0); iy < y1; ++iy)
    for (int64_t j = 0; j < g.kernel[1]; ++j) visit(iy, j - g.pad[1], g.column_spans[j].lo, g.column_spans[j].hi);
}

// One tap of a max window for outputs [lo, hi) of a row: output ox reads
// row[ox * stride], the input element at + ox * stride of the plane. The
// stride is a constant where it is 1 or 2 (Stride; 0: the runtime one), so
// that GCC vectorises the strided loads; indices stay 32-bit like argmax, so
// that the selects on them vectorise too.
template <int Stride>
inline void max_taps(const float* row, int32_t at, int64_t lo, int64_t hi, int64_t runtime_stride, float* best,
                     int32_t* best_at) {
  const int32_t stride = Stride ? Stride : static_cast<int32_t>(runtime_stride);
  const int32_t end = static_cast<int32_t>(hi);
  for (int32_t ox = static_cast<int32_t>(lo); ox < end; ++ox) {
    const float v = row[ox * stride];
    const bool take = v > best[ox] || v != v;
    best[ox] = take ? v : best[ox];
    best_at[ox] = take ? at + ox * stride : best_at[ox];
  }
}

// Small planes (Inception's 15x15 down to 1x1) make the row loops above 1 to
// 7 outputs long. Up to kSmallPlane values per plane, 16 planes go side by
// side instead: value i of plane l at lanes[i * kLanes + l], so that every
// tap is one 16-wide operation, in the same order per output as the row
// loops take, so the results are the same.
constexpr int64_t kLanes = 16, kSmallPlane = 256;

template <class T>
inline void to_lanes(const T* planes, int64_t plane, T* lanes) {
  for (int64_t l = 0; l < kLanes; ++l)
    for (int64_t i = 0; i < plane; ++i) lanes[i * kLanes + l] = planes[l * plane + i];
}

template <class T>
inline void from_lanes(const T* lanes, int64_t plane, T* planes) {
  for (int64_t l = 0; l < kLanes; ++l)
    for (int64_t i = 0; i < plane; ++i) planes[l * plane + i] = lanes[i * kLanes + l];
}

// Calls visit(i, o) for each tap of output row oy, in for_each_tap_row's
// order: output o reads input value i (both indices within a plane).
template <class Fn>
inline void for_each_tap(const PoolGeometry& g, int64_t oy, Fn visit) {
  for_each_tap_row(g, oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
    for (int64_t ox = lo; ox < hi; ++ox) visit(iy * g.in_w + ox * g.stride[1] + offset, oy * g.out_w + ox);
  });
}

// Planes that go side by side: a multiple of kLanes, or none.
inline int64_t lane_planes(const PoolGeometry& g, int64_t planes) {
  return g.in_h * g.in_w <= kSmallPlane && g.out_h * g.out_w <= kSmallPlane ? planes / kLanes * kLanes : 0;
}

POSEIDON_VECTOR_CLONES void max_lanes(const PoolGeometry& g, const float* src, float* dst, int32_t* argmax,
                                      int64_t groups) {
  alignas(64) float in[kSmallPlane * kLanes], best[kSmallPlane * kLanes];
  alignas(64) int32_t best_at[kSmallPlane * kLanes];
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t k = 0; k < groups; ++k) {
    to_lanes(src + k * kLanes * in_plane, in_plane, in);
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const int64_t first_row = std::max<int64_t>(oy * g.stride[0] - g.pad[0], 0);
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const int32_t first =
            static_cast<int32_t>(first_row * g.in_w + std::max<int64_t>(ox * g.stride[1] - g.pad[1], 0));
        for (int64_t l = 0; l < kLanes; ++l) {
          best[(oy * g.out_w + ox) * kLanes + l] = -std::numeric_limits<float>::infinity();
          best_at[(oy * g.out_w + ox) * kLanes + l] = first;
        }
      }
      for_each_tap(g, oy, [&](int64_t i, int64_t o) {
        const int32_t at = static_cast<int32_t>(i);
        const float* v = in + i * kLanes;
        float* b = best + o * kLanes;
        int32_t* b_at = best_at + o * kLanes;
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) {
          const bool take = v[l] > b[l] || v[l] != v[l];
          b[l] = take ? v[l] : b[l];
          b_at[l] = take ? at : b_at[l];
        }
      });
    }
    from_lanes(best, out_plane, dst + k * kLanes * out_plane);
    from_lanes(best_at, out_plane, argmax + k * kLanes * out_plane);
  }
}

POSEIDON_VECTOR_CLONES void avg_lanes(const PoolGeometry& g, const float* src, float* dst, int64_t groups) {
  alignas(64) float in[kSmallPlane * kLanes], sum[kSmallPlane * kLanes];
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t k = 0; k < groups; ++k) {
    to_lanes(src + k * kLanes * in_plane, in_plane, in);
    std::fill(sum, sum + out_plane * kLanes, 0.f);
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      for_each_tap(g, oy, [&](int64_t i, int64_t o) {
        const float* v = in + i * kLanes;
        float* acc = sum + o * kLanes;
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) acc[l] += v[l];
      });
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        const float divisor = g.row_divisors[oy] * g.col_divisors[ox];
        float* acc = sum + (oy * g.out_w + ox) * kLanes;
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) acc[l] /= divisor;
      }
    }
    from_lanes(sum, out_plane, dst + k * kLanes * out_plane);
  }
}

POSEIDON_VECTOR_CLONES void avg_lanes_grad(const PoolGeometry& g, const float* dy, float* dx, int64_t groups) {
  alignas(64) float grad[kSmallPlane * kLanes], acc[kSmallPlane * kLanes];
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  for (int64_t k = 0; k < groups; ++k) {
    to_lanes(dy + k * kLanes * out_plane, out_plane, grad);
    to_lanes(dx + k * kLanes * in_plane, in_plane, acc);
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const float row_scale = 1.f / g.row_divisors[oy];
      for_each_tap(g, oy, [&](int64_t i, int64_t o) {
        const float* gr = grad + o * kLanes;
        float* d = acc + i * kLanes;
        const float col_scale = g.col_scales[o - oy * g.out_w];
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) d[l] += gr[l] * row_scale * col_scale;
      });
    }
    from_lanes(acc, in_plane, dx + k * kLanes * in_plane);
  }
}

}  // namespace

// Not cloned: on the short rows of small planes (Inception's 15x15 and 7x7)
// the AVX-512 loops took twice the time of the SSE2 ones. Rows of at least
// 8 outputs go to the stride-2 kernels even where the planes are small
// enough to go side by side: on AVX2, VGG's 16x16 planes (8x8 outputs) took
// half the time that way, while its 8x8 planes and Inception's 15x15 took
// twice the time of the side-by-side loops.
void max_planes(const PoolGeometry& g, const float* src, float* dst, int32_t* argmax, int64_t planes) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  if (g.out_w >= 8 && max_planes_simd(g, src, dst, argmax, planes)) return;
  const int64_t side_by_side = lane_planes(g, planes);
  max_lanes(g, src, dst, argmax, side_by_side / kLanes);
  src += side_by_side * in_plane, dst += side_by_side * out_plane, argmax += side_by_side * out_plane;
  planes -= side_by_side;
  if (max_planes_simd(g, src, dst, argmax, planes)) return;
  for (int64_t p = 0; p < planes; ++p, src += in_plane, dst += out_plane, argmax += out_plane)
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      float* best = dst + oy * g.out_w;
      int32_t* best_at = argmax + oy * g.out_w;
      const int64_t first_row = std::max<int64_t>(oy * g.stride[0] - g.pad[0], 0);
      for (int64_t ox = 0; ox < g.out_w; ++ox) {
        best[ox] = -std::numeric_limits<float>::infinity();
        best_at[ox] = static_cast<int32_t>(first_row * g.in_w + std::max<int64_t>(ox * g.stride[1] - g.pad[1], 0));
      }
      for_each_tap_row(g, oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
        const float* row = src + iy * g.in_w + offset;
        const int32_t at = static_cast<int32_t>(iy * g.in_w + offset);
        switch (g.stride[1]) {
          case 1:
            max_taps<1>(row, at, lo, hi, 1, best, best_at);
            break;
          case 2:
            max_taps<2>(row, at, lo, hi, 2, best, best_at);
            break;
          default:
            max_taps<0>(row, at, lo, hi, g.stride[1], best, best_at);
        }
      });
    }
}

void max_planes_grad(const int32_t* argmax, const float* dy, int64_t out_plane, int64_t in_plane, float* dx,
                     int64_t planes) {
  for (int64_t p = 0; p < planes; ++p, argmax += out_plane, dy += out_plane, dx += in_plane)
    for (int64_t o = 0; o < out_plane; ++o) dx[argmax[o]] += dy[o];
}

POSEIDON_VECTOR_CLONES void avg_planes(const PoolGeometry& g, const float* src, float* dst, int64_t planes) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int64_t side_by_side = lane_planes(g, planes);
  avg_lanes(g, src, dst, side_by_side / kLanes);
  src += side_by_side * in_plane, dst += side_by_side * out_plane;
  planes -= side_by_side;
  for (int64_t p = 0; p < planes; ++p, src += in_plane, dst += out_plane)
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      float* sum = dst + oy * g.out_w;
      std::fill(sum, sum + g.out_w, 0.f);
      for_each_tap_row(g, oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
        const float* row = src + iy * g.in_w;
        for (int64_t ox = lo; ox < hi; ++ox) sum[ox] += row[ox * g.stride[1] + offset];
      });
      for (int64_t ox = 0; ox < g.out_w; ++ox) sum[ox] /= g.row_divisors[oy] * g.col_divisors[ox];
    }
}

POSEIDON_VECTOR_CLONES void avg_planes_grad(const PoolGeometry& g, const float* dy, float* dx, int64_t planes) {
  const int64_t in_plane = g.in_h * g.in_w, out_plane = g.out_h * g.out_w;
  const int64_t side_by_side = lane_planes(g, planes);
  avg_lanes_grad(g, dy, dx, side_by_side / kLanes);
  dy += side_by_side * out_plane, dx += side_by_side * in_plane;
  planes -= side_by_side;
  for (int64_t p = 0; p < planes; ++p, dy += out_plane, dx += in_plane)
    for (int64_t oy = 0; oy < g.out_h; ++oy) {
      const float* grad = dy + oy * g.out_w;
      // Reciprocals: a division per tap would cost more than the rest of the loop.
      const float row_scale = 1.f / g.row_divisors[oy];
      for_each_tap_row(g, oy, [&](int64_t iy, int64_t offset, int64_t lo, int64_t hi) {
        float* row = dx + iy * g.in_w;
        for (int64_t ox = lo; ox < hi; ++ox) row[ox * g.stride[1] + offset] += grad[ox] * row_scale * g.col_scales[ox];
      });
    }
}

void avg_whole_planes(const float* src, int64_t plane, float divisor, float* dst, int64_t planes) {
  for (int64_t p = 0; p < planes; ++p, src += plane) {
    float sum = 0.f;
    for (int64_t i = 0; i < plane; ++i) sum += src[i];
    dst[p] = sum / divisor;
  }
}

POSEIDON_VECTOR_CLONES void avg_whole_planes_grad(const float* dy, int64_t plane, float row_scale, float col_scale,
                                                  float* dx, int64_t planes) {
  for (int64_t p = 0; p < planes; ++p, dx += plane) {
    const float g = dy[p] * row_scale * col_scale;
#pragma omp simd
    for (int64_t i = 0; i < plane; ++i) dx[i] += g;
  }
}

}  // namespace poseidon
