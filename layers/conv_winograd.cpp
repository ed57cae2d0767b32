// Winograd F(2x2, 3x3) convolution on the CPU (see conv_winograd.h).
//
// The transforms, with d a 4x4 input tile, g a 3x3 filter and Y a 2x2 output:
//   V = B^T d B,  U = G g G^T,  Y = A^T (U . V) A, summed over input channels;
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
//   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],  A^T = [1 1 1 0; 0 1 -1 -1].
// Tile (ty, tx) reads padded rows 2ty..2ty+3 and columns 2tx..2tx+3. Each
// transform works on one row of tiles of one channel at a time, its rows
// split into even and odd columns first, so that the loops over tiles read
// and write consecutive floats and vectorise.
#include "layers/conv_winograd.h"

#include <algorithm>

#include "core/error.h"
#include "core/math.h"

namespace poseidon {
namespace {

constexpr int kPositions = 16;  // the 4x4 transformed domain
// Tiles in one row at most: bounds the rows' stack buffers.
constexpr int64_t kMaxTilesW = 512;

// One image row split into its even and odd columns, shifted by the padding:
// even[s] = row[2s - pad], odd[s] = row[2s + 1 - pad], 0 outside [0, width);
// `count` entries each. Without a row (above or below the image) all zero.
void split_row(const float* row, int64_t width, int64_t pad, int64_t count, float* even, float* odd) {
  if (!row) {
    std::fill_n(even, count, 0.f);
    std::fill_n(odd, count, 0.f);
    return;
  }
  // Both columns of entries [lo, hi) lie inside the row.
  const int64_t lo = std::min(count, (pad + 1) / 2), hi = std::max(lo, std::min(count, (width + pad) / 2));
  auto edge = [&](int64_t s) {
    const int64_t e = 2 * s - pad, o = e + 1;
    even[s] = e >= 0 && e < width ? row[e] : 0.f;
    odd[s] = o >= 0 && o < width ? row[o] : 0.f;
  };
  for (int64_t s = 0; s < lo; ++s) edge(s);
  const float* inside = row + 2 * lo - pad;
#pragma omp simd
  for (int64_t s = lo; s < hi; ++s) {
    even[s] = inside[2 * (s - lo)];
    odd[s] = inside[2 * (s - lo) + 1];
  }
  for (int64_t s = hi; s < count; ++s) edge(s);
}

// Writes (or adds) a row of 2-wide output tiles, even and odd columns apart,
// into an image row of `width` pixels.
template <bool kAdd>
void join_row(const float* even, const float* odd, int64_t width, float* row) {
  for (int64_t x = 0; x < width; ++x) {
    const float v = (x & 1) ? odd[x >> 1] : even[x >> 1];
    row[x] = kAdd ? row[x] + v : v;
  }
}

// Runs fn(n, c, ty) for each row ty of tiles of each channel c of `count`
// images of `pixels` pixels, spread over the threads unless small.
template <class Fn>
void for_each_tile_row(int64_t count, int64_t channels, int64_t tile_rows, int64_t pixels, Fn fn) {
#pragma omp parallel for collapse(3) if (count * channels * pixels > 32768)
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t ty = 0; ty < tile_rows; ++ty) fn(n, c, ty);
}

}  // namespace

bool WinogradConv::covers(const ConvGeometry& g, int64_t groups) {
  return groups == 1 && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
         g.dilation_w == 1 && g.pad_h <= 2 && g.pad_w <= 2 && g.fits() && g.width <= 2 * kMaxTilesW &&
         g.out_width() <= 2 * kMaxTilesW;
}

WinogradConv::WinogradConv(const WinogradShape& s) : shape_(s) {
  const int64_t out_h = s.height + 2 * s.pad_h - 2, out_w = s.width + 2 * s.pad_w - 2;
  forward_ = {.in = s.in_channels,
              .out = s.out_channels,
              .in_h = s.height,
              .in_w = s.width,
              .pad_h = s.pad_h,
              .pad_w = s.pad_w,
              .out_h = out_h,
              .out_w = out_w};
  data_grad_ = {.in = s.out_channels,
                .out = s.in_channels,
                .in_h = out_h,
                .in_w = out_w,
                .pad_h = 2 - s.pad_h,
                .pad_w = 2 - s.pad_w,
                .out_h = s.height,
                .out_w = s.width};
  const int64_t channels = std::max(s.in_channels, s.out_channels);
  const int64_t tiles = std::max(forward_.tiles(), data_grad_.tiles());
  chunk_ = images_per_chunk(2 * kPositions * channels * tiles, s.batch);
  v_.resize(kPositions * channels * tiles * chunk_);
  m_.resize(v_.size());
  u_.resize(kPositions * s.in_channels * s.out_channels);
  du_.resize(u_.size());
}

void WinogradConv::transform_filters(const float* w, bool rotate) {
  const int64_t out = shape_.out_channels, in = shape_.in_channels;
  const int64_t rows = rotate ? in : out, cols = rotate ? out : in;
#pragma omp parallel for collapse(2) if (out * in > 4096)
  for (int64_t k = 0; k < out; ++k)
    for (int64_t c = 0; c < in; ++c) {
      const float* f = w + (k * in + c) * 9;
      float g[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) g[i][j] = rotate ? f[(2 - i) * 3 + (2 - j)] : f[i * 3 + j];
      float gg[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = g[0][j];
        gg[1][j] = 0.5f * (g[0][j] + g[1][j] + g[2][j]);
        gg[2][j] = 0.5f * (g[0][j] - g[1][j] + g[2][j]);
        gg[3][j] = g[2][j];
      }
      const int64_t r = rotate ? c : k, col = rotate ? k : c;
      for (int i = 0; i < 4; ++i) {
        const float u[4] = {gg[i][0], 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]), 0.5f * (gg[i][0] - gg[i][1] + gg[i][2]),
                            gg[i][2]};
        for (int j = 0; j < 4; ++j) u_[((i * 4 + j) * rows + r) * cols + col] = u[j];
      }
    }
}

void WinogradConv::transform_input(const Pass& p, const float* images, int64_t count, float* v) const {
  const int64_t th = p.tiles_h(), tw = p.tiles_w(), total = count * th * tw;
  const int64_t plane = p.in_h * p.in_w;
  for_each_tile_row(count, p.in, th, plane, [&](int64_t n, int64_t c, int64_t ty) {
    float even[4][kMaxTilesW + 1], odd[4][kMaxTilesW + 1];
    const float* image = images + (n * p.in + c) * plane;
    for (int i = 0; i < 4; ++i) {
      const int64_t y = 2 * ty + i - p.pad_h;
      split_row(y >= 0 && y < p.in_h ? image + y * p.in_w : nullptr, p.in_w, p.pad_w, tw + 1, even[i], odd[i]);
    }
    float* dst = v + c * total + (n * th + ty) * tw;
    const int64_t step = p.in * total;  // between positions
#pragma omp simd
    for (int64_t tx = 0; tx < tw; ++tx) {
      float b[4][4];  // d B, row by row
      for (int i = 0; i < 4; ++i) {
        const float d0 = even[i][tx], d1 = odd[i][tx], d2 = even[i][tx + 1], d3 = odd[i][tx + 1];
        b[i][0] = d0 - d2;
        b[i][1] = d1 + d2;
        b[i][2] = d2 - d1;
        b[i][3] = d1 - d3;
      }
      for (int j = 0; j < 4; ++j) {
        dst[(0 * 4 + j) * step + tx] = b[0][j] - b[2][j];
        dst[(1 * 4 + j) * step + tx] = b[1][j] + b[2][j];
        dst[(2 * 4 + j) * step + tx] = b[2][j] - b[1][j];
        dst[(3 * 4 + j) * step + tx] = b[1][j] - b[3][j];
      }
    }
  });
}

void WinogradConv::transform_output(const Pass& p, const float* m, int64_t count, const float* bias, float* out,
                                    Store store) const {
  const int64_t th = p.tiles_h(), tw = p.tiles_w(), total = count * th * tw;
  const int64_t plane = p.out_h * p.out_w;
  for_each_tile_row(count, p.out, th, plane, [&](int64_t n, int64_t k, int64_t ty) {
    float even[2][kMaxTilesW], odd[2][kMaxTilesW];
    const float* src = m + k * total + (n * th + ty) * tw;
    const int64_t step = p.out * total;
    const float b = bias ? bias[k] : 0.f;
#pragma omp simd
    for (int64_t tx = 0; tx < tw; ++tx) {
      float s[2][4];  // A^T M, column by column
      for (int j = 0; j < 4; ++j) {
        const float m0 = src[(0 * 4 + j) * step + tx], m1 = src[(1 * 4 + j) * step + tx];
        const float m2 = src[(2 * 4 + j) * step + tx], m3 = src[(3 * 4 + j) * step + tx];
        s[0][j] = m0 + m1 + m2;
        s[1][j] = m1 - m2 - m3;
      }
      for (int i = 0; i < 2; ++i) {
        float y0 = s[i][0] + s[i][1] + s[i][2] + b, y1 = s[i][1] - s[i][2] - s[i][3] + b;
        if (store == Store::overwrite_relu) {
          y0 = y0 > 0.f ? y0 : 0.f;  // as the ReLU layer writes it (NaN becomes 0)
          y1 = y1 > 0.f ? y1 : 0.f;
        }
        even[i][tx] = y0;
        odd[i][tx] = y1;
      }
    }
    float* image = out + (n * p.out + k) * plane;
    for (int i = 0; i < 2 && 2 * ty + i < p.out_h; ++i) {
      float* row = image + (2 * ty + i) * p.out_w;
      if (store == Store::add)
        join_row<true>(even[i], odd[i], p.out_w, row);
      else
        join_row<false>(even[i], odd[i], p.out_w, row);
    }
  });
}

void WinogradConv::transform_output_grad(const Pass& p, const float* dy, int64_t count, float* m) const {
  const int64_t th = p.tiles_h(), tw = p.tiles_w(), total = count * th * tw;
  const int64_t plane = p.out_h * p.out_w;
  for_each_tile_row(count, p.out, th, plane, [&](int64_t n, int64_t k, int64_t ty) {
    float even[2][kMaxTilesW + 1], odd[2][kMaxTilesW + 1];
    const float* image = dy + (n * p.out + k) * plane;
    for (int i = 0; i < 2; ++i) {
      const int64_t y = 2 * ty + i;
      split_row(y < p.out_h ? image + y * p.out_w : nullptr, p.out_w, 0, tw, even[i], odd[i]);
    }
    float* dst = m + k * total + (n * th + ty) * tw;
    const int64_t step = p.out * total;
#pragma omp simd
    for (int64_t tx = 0; tx < tw; ++tx) {
      float c[2][4];  // dY A^T, row by row
      for (int i = 0; i < 2; ++i) {
        const float y0 = even[i][tx], y1 = odd[i][tx];
        c[i][0] = y0;
        c[i][1] = y0 + y1;
        c[i][2] = y0 - y1;
        c[i][3] = -y1;
      }
      for (int j = 0; j < 4; ++j) {
        dst[(0 * 4 + j) * step + tx] = c[0][j];
        dst[(1 * 4 + j) * step + tx] = c[0][j] + c[1][j];
        dst[(2 * 4 + j) * step + tx] = c[0][j] - c[1][j];
        dst[(3 * 4 + j) * step + tx] = -c[1][j];
      }
    }
  });
}

void WinogradConv::convolve(const Pass& p, const float* in, const float* b, float* out, Store store) {
  for (int64_t n0 = 0; n0 < shape_.batch; n0 += chunk_) {
    const int64_t count = std::min(chunk_, shape_.batch - n0), total = count * p.tiles();
    transform_input(p, in + n0 * p.in * p.in_h * p.in_w, count, v_.data());
    for (int q = 0; q < kPositions; ++q)
      gemm(false, false, p.out, total, p.in, 1.f, u_.data() + q * p.out * p.in, v_.data() + q * p.in * total, 0.f,
           m_.data() + q * p.out * total);
    transform_output(p, m_.data(), count, b, out + n0 * p.out * p.out_h * p.out_w, store);
  }
}

void WinogradConv::forward(const float* x, const float* w, const float* b, float* y) {
  transform_filters(w, false);
  convolve(forward_, x, shape_.bias ? b : nullptr, y, shape_.relu ? Store::overwrite_relu : Store::overwrite);
}

void WinogradConv::backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                            bool overwrite_dx) {
  const Pass& p = forward_;
  const int64_t in = p.in, out = p.out, out_plane = p.out_h * p.out_w;
  for (int64_t n0 = 0; n0 < shape_.batch; n0 += chunk_) {
    const int64_t count = std::min(chunk_, shape_.batch - n0), total = count * p.tiles();
    transform_input(p, x + n0 * in * p.in_h * p.in_w, count, v_.data());
    transform_output_grad(p, dy + n0 * out * out_plane, count, m_.data());
    for (int q = 0; q < kPositions; ++q)
      gemm(false, true, out, in, total, 1.f, m_.data() + q * out * total, v_.data() + q * in * total,
           n0 == 0 ? 0.f : 1.f, du_.data() + q * out * in);
  }
  // dW = G^T dU G per filter.
#pragma omp parallel for collapse(2) if (out * in > 4096)
  for (int64_t k = 0; k < out; ++k)
    for (int64_t c = 0; c < in; ++c) {
      float d[4][4];
      for (int q = 0; q < kPositions; ++q) d[q / 4][q % 4] = du_[(q * out + k) * in + c];
      float e[3][4];  // G^T dU
      for (int j = 0; j < 4; ++j) {
        e[0][j] = d[0][j] + 0.5f * (d[1][j] + d[2][j]);
        e[1][j] = 0.5f * (d[1][j] - d[2][j]);
        e[2][j] = 0.5f * (d[1][j] + d[2][j]) + d[3][j];
      }
      float* f = dw + (k * in + c) * 9;
      for (int i = 0; i < 3; ++i) {
        f[i * 3 + 0] = e[i][0] + 0.5f * (e[i][1] + e[i][2]);
        f[i * 3 + 1] = 0.5f * (e[i][1] - e[i][2]);
        f[i * 3 + 2] = 0.5f * (e[i][1] + e[i][2]) + e[i][3];
      }
    }
  if (shape_.bias) {
#pragma omp parallel for if (shape_.batch * out * out_plane > 32768)
    for (int64_t k = 0; k < out; ++k) {
      float sum = 0.f;
      for (int64_t n = 0; n < shape_.batch; ++n) {
        const float* image = dy + (n * out + k) * out_plane;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < out_plane; ++i) sum += image[i];
      }
      db[k] = sum;
    }
  }
  if (!dx) return;
  transform_filters(w, true);
  convolve(data_grad_, dy, nullptr, dx, overwrite_dx ? Store::overwrite : Store::add);
}

}  // namespace poseidon
