// Pooling: gradient cases, output sizes from PyTorch's documented formula
// (including the ceil_mode rule), and forward and backward checked against a
// direct loop over every kernel tap.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("pool_max_pad", "{name: p, type: pool, kernel_size: 3, stride: 2, pad: 1}", {{2, 2, 7, 7}});
GRAD_CASE("pool_max_ceil", "{name: p, type: pool, kernel_size: 3, stride: 2, ceil_mode: true}", {{2, 2, 6, 6}});
GRAD_CASE("pool_max_asym", "{name: p, type: pool, kernel_size: [2, 3], stride: [1, 2]}", {{2, 2, 5, 6}});
GRAD_CASE("pool_avg_pad", "{name: p, type: pool, mode: avg, kernel_size: 3, stride: 2, pad: 1}", {{2, 2, 7, 7}});
GRAD_CASE("pool_avg_ceil_pad", "{name: p, type: pool, mode: avg, kernel_size: 3, stride: 2, pad: 1, ceil_mode: true}",
          {{2, 2, 6, 6}});
GRAD_CASE("pool_avg_exclude_pad",
          "{name: p, type: pool, mode: avg, kernel_size: 3, stride: 2, pad: 1, ceil_mode: true, "
          "count_include_pad: false}",
          {{2, 2, 6, 6}});
GRAD_CASE("pool_global_avg", "{name: p, type: pool, mode: avg, global: true}", {{2, 3, 5, 5}});
GRAD_CASE("pool_global_max", "{name: p, type: pool, global: true}", {{2, 3, 5, 5}});

namespace {

std::unique_ptr<Layer> make_pool(const std::string& yaml) {
  return LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
}

struct PoolSpec {
  std::string label;
  int64_t n, c, h, w;
  int64_t kh, kw, sh, sw, ph, pw;
  bool max = true, ceil_mode = false, include_pad = true, global = false;

  std::string yaml() const {
    std::string y = "{name: p, type: pool, mode: " + std::string(max ? "max" : "avg") +
                    ", count_include_pad: " + (include_pad ? "true" : "false");
    if (global) return y + ", global: true}";
    auto pair = [](int64_t a, int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; };
    return y + ", kernel_size: " + pair(kh, kw) + ", stride: " + pair(sh, sw) + ", pad: " + pair(ph, pw) +
           ", ceil_mode: " + (ceil_mode ? "true" : "false") + "}";
  }
};

void PrintTo(const PoolSpec& s, std::ostream* os) { *os << s.label; }

// PyTorch's MaxPool2d documentation: floor (or ceil) of (in + 2p - k) / s, plus
// one, dropping a last window that would start in the right padding.
int64_t documented_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  double q = double(in + 2 * p - k) / double(s);
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

TEST(Pool, OutputSizesFollowPyTorch) {
  struct Row {
    int64_t in, k, s, p;
    bool ceil_mode;
    int64_t want;
  };
  for (const Row& r : {Row{6, 3, 2, 0, true, 3}, Row{6, 3, 2, 0, false, 2}, Row{6, 3, 2, 1, true, 4},
                       Row{6, 3, 2, 1, false, 3}, Row{5, 2, 2, 1, true, 3}, Row{5, 2, 2, 0, true, 3},
                       Row{5, 2, 2, 0, false, 2}, Row{7, 3, 2, 1, true, 4}, Row{3, 3, 1, 0, true, 1}}) {
    ASSERT_EQ(documented_size(r.in, r.k, r.s, r.p, r.ceil_mode), r.want);
    auto layer =
        make_pool("{name: p, type: pool, kernel_size: " + std::to_string(r.k) + ", stride: " + std::to_string(r.s) +
                  ", pad: " + std::to_string(r.p) + ", ceil_mode: " + (r.ceil_mode ? "true" : "false") + "}");
    EXPECT_EQ(layer->reshape({{1, 2, r.in, r.in + 1}}).at(0),
              (Shape{1, 2, r.want, documented_size(r.in + 1, r.k, r.s, r.p, r.ceil_mode)}))
        << "in " << r.in << " k " << r.k << " s " << r.s << " p " << r.p << " ceil " << r.ceil_mode;
  }
}

TEST(Pool, StrideDefaultsToKernelAndGlobalGivesOneByOne) {
  EXPECT_EQ(make_pool("{name: p, type: pool, kernel_size: 2}")->reshape({{3, 4, 8, 6}}).at(0), (Shape{3, 4, 4, 3}));
  EXPECT_EQ(make_pool("{name: p, type: pool, mode: avg, global: true}")->reshape({{3, 4, 7, 5}}).at(0),
            (Shape{3, 4, 1, 1}));
}

class PoolReference : public ::testing::TestWithParam<PoolSpec> {};

TEST_P(PoolReference, ForwardAndBackwardMatchDirectLoops) {
  PoolSpec s = GetParam();
  auto layer = make_pool(s.yaml());
  if (s.global) s.kh = s.h, s.kw = s.w, s.sh = s.sw = 1, s.ph = s.pw = 0;
  const int64_t oh = documented_size(s.h, s.kh, s.sh, s.ph, s.ceil_mode);
  const int64_t ow = documented_size(s.w, s.kw, s.sw, s.pw, s.ceil_mode);
  ASSERT_EQ(layer->reshape({{s.n, s.c, s.h, s.w}}).at(0), (Shape{s.n, s.c, oh, ow}));

  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  Tensor x({s.n, s.c, s.h, s.w}), y({s.n, s.c, oh, ow}), dy({s.n, s.c, oh, ow}), dx({s.n, s.c, s.h, s.w});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = uni(rng);
  for (int64_t i = 0; i < dy.numel(); ++i) dy[i] = uni(rng);
  dx.fill(1.f);  // input gradients accumulate

  std::vector<double> want_y(y.numel()), want_dx(dx.numel(), 1.0);
  for (int64_t plane = 0; plane < s.n * s.c; ++plane)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        const int64_t o = (plane * oh + oy) * ow + ox;
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t best_at = -1, padded_taps = 0;
        std::vector<int64_t> inside;
        for (int64_t i = 0; i < s.kh; ++i)
          for (int64_t j = 0; j < s.kw; ++j) {
            const int64_t iy = oy * s.sh - s.ph + i, ix = ox * s.sw - s.pw + j;
            if (iy < s.h + s.ph && ix < s.w + s.pw) ++padded_taps;  // taps never start left of the padding
            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
            const int64_t at = (plane * s.h + iy) * s.w + ix;
            inside.push_back(at);
            sum += x[at];
            if (x[at] > best) best = x[at], best_at = at;
          }
        ASSERT_FALSE(inside.empty()) << "every window must overlap the input";
        if (s.max) {
          want_y[o] = best;
          want_dx[best_at] += dy[o];
        } else {
          const double divisor = s.include_pad ? padded_taps : inside.size();
          want_y[o] = sum / divisor;
          for (int64_t at : inside) want_dx[at] += dy[o] / divisor;
        }
      }

  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y[i], want_y[i], 1e-5 * (1 + std::abs(want_y[i]))) << i;
  for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_NEAR(dx[i], want_dx[i], 1e-5 * (1 + std::abs(want_dx[i]))) << i;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, PoolReference,
    ::testing::Values(PoolSpec{"max_pad", 2, 3, 7, 7, 3, 3, 2, 2, 1, 1},
                      PoolSpec{"max_ceil", 2, 3, 6, 6, 3, 3, 2, 2, 0, 0, true, true},
                      PoolSpec{"max_ceil_pad_asym", 2, 2, 6, 7, 3, 2, 2, 1, 1, 1, true, true},
                      PoolSpec{"avg_pad", 2, 3, 7, 7, 3, 3, 2, 2, 1, 1, false},
                      PoolSpec{"avg_ceil_pad", 2, 3, 6, 6, 3, 3, 2, 2, 1, 1, false, true},
                      PoolSpec{"avg_ceil_pad_exclude", 2, 3, 6, 6, 3, 3, 2, 2, 1, 1, false, true, false},
                      PoolSpec{"avg_exclude_pad", 2, 3, 7, 5, 3, 3, 2, 2, 1, 1, false, false, false},
                      PoolSpec{"global_avg", 2, 3, 5, 4, 0, 0, 0, 0, 0, 0, false, false, true, true},
                      PoolSpec{"global_max", 2, 3, 5, 4, 0, 0, 0, 0, 0, 0, true, false, true, true},
                      // The benchmark models' pooling shapes, scaled down, and the
                      // three column strides the CPU loops handle apart (1, 2, other).
                      PoolSpec{"vgg_max2", 3, 8, 32, 32, 2, 2, 2, 2, 0, 0},
                      PoolSpec{"resnet_max3_pad", 3, 8, 28, 28, 3, 3, 2, 2, 1, 1},
                      PoolSpec{"cifar_max3_ceil", 3, 8, 32, 32, 3, 3, 2, 2, 0, 0, true, true},
                      PoolSpec{"cifar_avg3_ceil", 3, 8, 16, 16, 3, 3, 2, 2, 0, 0, false, true},
                      PoolSpec{"floor_max_short_of_right_edge", 2, 4, 7, 9, 2, 2, 2, 2, 0, 0},
                      // 2x2 at stride 2 on planes too large to go side by side:
                      // LeNet's 24x24 (12 outputs a row, one masked run) and rows
                      // of 35 outputs (two full runs of 16 and 3 left).
                      PoolSpec{"lenet_max2_24x24", 2, 20, 24, 24, 2, 2, 2, 2, 0, 0},
                      PoolSpec{"max2_rows_of_35", 1, 3, 21, 71, 2, 2, 2, 2, 0, 0},
                      PoolSpec{"max_stride3_pad", 2, 3, 11, 11, 3, 3, 3, 3, 1, 1},
                      PoolSpec{"max_stride1_pad", 2, 3, 9, 9, 3, 3, 1, 1, 1, 1},
                      PoolSpec{"global_avg_large", 3, 16, 8, 8, 0, 0, 0, 0, 0, 0, false, false, true, true},
                      // Inception's small planes, many to a thread's run of planes
                      // and enough for threads; global pooling of 1x1 planes, of
                      // one plane larger than a run, and a kernel the plane's size.
                      PoolSpec{"inception_avg3_pad_3x3", 2, 40, 3, 3, 3, 3, 1, 1, 1, 1, false},
                      PoolSpec{"inception_avg3_pad_1x1", 2, 40, 1, 1, 3, 3, 1, 1, 1, 1, false},
                      PoolSpec{"inception_max3_15x15", 2, 96, 15, 15, 3, 3, 2, 2, 0, 0},
                      PoolSpec{"inception_avg3_pad_7x7", 3, 300, 7, 7, 3, 3, 1, 1, 1, 1, false},
                      PoolSpec{"global_avg_1x1", 2, 5, 1, 1, 0, 0, 0, 0, 0, 0, false, false, true, true},
                      PoolSpec{"global_avg_threaded_runs", 4, 300, 7, 7, 0, 0, 0, 0, 0, 0, false, false, true, true},
                      PoolSpec{"global_avg_one_big_plane", 1, 1, 181, 183, 0, 0, 0, 0, 0, 0, false, false, true, true},
                      PoolSpec{"avg_kernel_is_plane", 2, 3, 5, 4, 5, 4, 1, 1, 0, 0, false},
                      // Small planes 16 side by side and 5 left over, with padding,
                      // ceil_mode and padding left out of the divisor.
                      PoolSpec{"small_planes_max_pad_ceil", 3, 7, 6, 5, 3, 3, 2, 2, 1, 1, true, true},
                      PoolSpec{"small_planes_avg_ceil_exclude", 3, 7, 6, 5, 3, 3, 2, 2, 1, 1, false, true, false},
                      // Small planes whose rows of 8 outputs go to the stride-2 kernels.
                      PoolSpec{"small_planes_rows_of_8", 2, 9, 16, 16, 2, 2, 2, 2, 0, 0},
                      PoolSpec{"small_planes_rows_of_8_pad_ceil", 2, 9, 14, 15, 3, 3, 2, 2, 1, 1, true, true}),
    [](const auto& info) { return info.param.label; });

// A NaN wins its window and the last one in scan order takes the gradient,
// as in PyTorch, also where small planes go 16 side by side (32 planes here).
TEST(Pool, MaxTakesTheLastNanOfAWindow) {
  auto layer = make_pool("{name: p, type: pool, kernel_size: 2, stride: 2}");
  const Shape in = {2, 16, 4, 4}, out = {2, 16, 2, 2};
  ASSERT_EQ(layer->reshape({in}).at(0), out);
  Tensor x(in), y(out), dy(out), dx(in);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(i % 5);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Plane 3: window (0, 0) holds two NaNs, at (0, 1) and (1, 0); plane 20:
  // window (1, 1) one, at (3, 3).
  x[3 * 16 + 1] = nan;
  x[3 * 16 + 4] = nan;
  x[20 * 16 + 15] = nan;
  dy.fill(1.f);
  dx.fill(0.f);
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  EXPECT_TRUE(std::isnan(y[3 * 4 + 0]));
  EXPECT_TRUE(std::isnan(y[20 * 4 + 3]));
  EXPECT_EQ(dx[3 * 16 + 4], 1.f);
  EXPECT_EQ(dx[3 * 16 + 1], 0.f);
  EXPECT_EQ(dx[20 * 16 + 15], 1.f);
  for (int64_t o = 0; o < y.numel(); ++o)
    if (o != 3 * 4 && o != 20 * 4 + 3) EXPECT_FALSE(std::isnan(y[o])) << o;
}

// The same rule where the stride-2 kernels take whole rows (planes too large
// to go side by side, rows leaving a partial block of outputs): among equal
// values the first in scan order takes the gradient, a NaN takes its window
// from any value, and of two NaNs the later; padding and ceil mode's last
// windows read nothing outside the plane.
struct ScanOrderCase {
  std::string label;
  int64_t h, w, kernel, pad;
  bool ceil_mode;
};

void PrintTo(const ScanOrderCase& c, std::ostream* os) { *os << c.label; }

class MaxScanOrder : public ::testing::TestWithParam<ScanOrderCase> {};

TEST_P(MaxScanOrder, KeepsTheScanOrderOnTiesAndNans) {
  const ScanOrderCase& c = GetParam();
  auto layer = make_pool("{name: p, type: pool, kernel_size: " + std::to_string(c.kernel) + ", stride: 2, pad: " +
                         std::to_string(c.pad) + ", ceil_mode: " + (c.ceil_mode ? "true" : "false") + "}");
  const int64_t h = c.h, w = c.w, planes = 2;
  const int64_t oh = documented_size(h, c.kernel, 2, c.pad, c.ceil_mode);
  const int64_t ow = documented_size(w, c.kernel, 2, c.pad, c.ceil_mode);
  ASSERT_EQ(layer->reshape({{1, planes, h, w}}).at(0), (Shape{1, planes, oh, ow}));
  Tensor x({1, planes, h, w}), y({1, planes, oh, ow}), dy({1, planes, oh, ow}), dx({1, planes, h, w});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(i % 3);  // many ties
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 5; i < x.numel(); i += 37) x[i] = nan;
  for (int64_t i = 0; i < dy.numel(); ++i) dy[i] = static_cast<float>(i + 1);
  dx.fill(0.f);
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  RunContext ctx;
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  std::vector<float> want_dx(dx.numel(), 0.f);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t best_at = -1;
        for (int64_t i = 0; i < c.kernel; ++i)
          for (int64_t j = 0; j < c.kernel; ++j) {
            const int64_t iy = 2 * oy - c.pad + i, ix = 2 * ox - c.pad + j;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const int64_t at = (p * h + iy) * w + ix;
            if (best_at < 0 || x[at] > best || std::isnan(x[at])) best = x[at], best_at = at;
          }
        const int64_t o = (p * oh + oy) * ow + ox;
        if (std::isnan(best))
          EXPECT_TRUE(std::isnan(y[o])) << o;
        else
          EXPECT_EQ(y[o], best) << o;
        want_dx[best_at] += dy[o];
      }
  for (int64_t i = 0; i < dx.numel(); ++i) EXPECT_EQ(dx[i], want_dx[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Windows, MaxScanOrder,
                         ::testing::Values(ScanOrderCase{"max2x2_18x34", 18, 34, 2, 0, false},
                                           ScanOrderCase{"max3x3_ceil_19x37", 19, 37, 3, 0, true},
                                           ScanOrderCase{"max3x3_pad1_18x35", 18, 35, 3, 1, false},
                                           ScanOrderCase{"max5x5_pad2_ceil_17x23", 17, 23, 5, 2, true}),
                         [](const auto& info) { return info.param.label; });

template <class Fn>
void expect_error_naming(Fn build, const std::string& key) {
  try {
    build();
    ADD_FAILURE() << "expected an error naming '" << key << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(Pool, RejectsBadConfigsNamingTheKey) {
  expect_error_naming([] { make_pool("{name: p, type: pool, kernel_size: 3, pad: 2}"); }, "pad");
  expect_error_naming(
      [] {
        make_pool("{name: p, type: pool, kernel_size: 5}")->reshape({{1, 1, 3, 3}});
      },
      "kernel_size");
  expect_error_naming([] { make_pool("{name: p, type: pool, mode: avg}"); }, "kernel_size");
  expect_error_naming([] { make_pool("{name: p, type: pool, global: true, kernel_size: 2}"); }, "kernel_size");
  expect_error_naming([] { make_pool("{name: p, type: pool, global: true, stride: 2}"); }, "stride");
  expect_error_naming([] { make_pool("{name: p, type: pool, mode: min, kernel_size: 2}"); }, "mode");
  expect_error_naming([] { make_pool("{name: p, type: pool, kernel_size: 2, stride: 0}"); }, "stride");
  expect_error_naming([] { make_pool("{name: p, type: pool, kernel_size: 2}")->reshape({{2, 8}}); }, "NCHW");
}

}  // namespace
}  // namespace poseidon::testing
