// The weight gradient over parts of the batch (layers/conv_split_weight_grad.h)
// against the whole batch's primitive, in float32 and bfloat16, over 2 and 3
// parts and an odd batch; the same bits whatever the number of threads that
// run the parts; and the conv path that uses it for strided bfloat16 layers
// against a direct sum in double.
#include "layers/conv_split_weight_grad.h"

#include <gtest/gtest.h>

#ifdef POSEIDON_HAVE_DNNL

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "layers/conv_dnnl.h"
#include "layers/dnnl_support.h"

namespace poseidon::testing {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Conv {
  int64_t batch, channels, size, out, kernel, stride, pad;
  memory::data_type type;
  int64_t out_size() const { return (size + 2 * pad - kernel) / stride + 1; }
};

dnnl::convolution_backward_weights::primitive_desc whole_batch(const Conv& c) {
  const auto any = memory::format_tag::any;
  const memory::desc x({c.batch, c.channels, c.size, c.size}, c.type, any);
  const memory::desc w({c.out, c.channels, c.kernel, c.kernel}, c.type, any);
  const memory::desc dw({c.out, c.channels, c.kernel, c.kernel}, memory::data_type::f32, any);
  const memory::desc b({c.out}, memory::data_type::f32, memory::format_tag::x);
  const memory::desc y({c.batch, c.out, c.out_size(), c.out_size()}, c.type, any);
  const Dims strides{c.stride, c.stride}, dilates{0, 0}, pad{c.pad, c.pad};
  const auto direct = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::primitive_desc hint(
      {dnnl::prop_kind::forward_training, direct, x, w, b, y, strides, dilates, pad, pad}, dnnl_cpu_engine());
  return {{direct, x, dw, b, y, strides, dilates, pad, pad}, dnnl_user_scratchpad(), dnnl_cpu_engine(), hint};
}

// Bytes of random values in [-1, 1] of the tensor's type, laid out however
// `desc` lays them out (both runs read the same bytes). The channel counts
// below fill whole blocks, so no layout pads.
std::vector<char> random_bytes(const memory::desc& desc, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<char> bytes(desc.get_size());
  if (desc.data_type() == memory::data_type::bf16) {
    auto* words = reinterpret_cast<uint16_t*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 2; ++i) words[i] = to_bf16(u(rng));
  } else {
    auto* floats = reinterpret_cast<float*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 4; ++i) floats[i] = u(rng);
  }
  return bytes;
}

struct Grads {
  std::vector<float> dw, db;
};

Grads run_whole(const dnnl::convolution_backward_weights::primitive_desc& pd, std::vector<char>& x,
                std::vector<char>& dy) {
  Grads g{std::vector<float>(pd.diff_weights_desc().get_size() / 4),
          std::vector<float>(pd.diff_bias_desc().get_size() / 4)};
  const auto& e = dnnl_cpu_engine();
  dnnl::stream s(e);
  dnnl::convolution_backward_weights(pd).execute(
      s, {{DNNL_ARG_SRC, memory(pd.src_desc(), e, x.data())},
          {DNNL_ARG_DIFF_DST, memory(pd.diff_dst_desc(), e, dy.data())},
          {DNNL_ARG_DIFF_WEIGHTS, memory(pd.diff_weights_desc(), e, g.dw.data())},
          {DNNL_ARG_DIFF_BIAS, memory(pd.diff_bias_desc(), e, g.db.data())},
          {DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), e)}});
  s.wait();
  return g;
}

Grads run_split(SplitWeightGrad& split, const dnnl::convolution_backward_weights::primitive_desc& pd,
                const std::vector<char>& x, const std::vector<char>& dy) {
  Grads g{std::vector<float>(pd.diff_weights_desc().get_size() / 4, NAN),
          std::vector<float>(pd.diff_bias_desc().get_size() / 4, NAN)};
  split.run(x.data(), dy.data(), g.dw.data(), g.db.data());
  return g;
}

// Each gradient sums `terms` products of values in [-1, 1], so every
// partial sum is within `terms` and each of float32's roundings within
// terms * 2^-24: two orders of the same sum differ by at most twice all of
// them. A part left out or counted twice moves a sum by about sqrt(terms / parts) / 3.
void expect_same_sums(const std::vector<float>& got, const std::vector<float>& want, double terms, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  const double bound = 2 * terms * terms * std::ldexp(1.0, -24);
  int64_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= bound) && wrong++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " against " << want[i] << " (bound " << bound << ")";
  EXPECT_EQ(wrong, 0) << what;
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCount() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

struct SplitCase {
  Conv conv;
  int parts;
};

void PrintTo(const SplitCase& k, std::ostream* os) {
  *os << (k.conv.type == memory::data_type::bf16 ? "bf16" : "f32") << " batch " << k.conv.batch << " stride "
      << k.conv.stride << " kernel " << k.conv.kernel << " in " << k.parts << " parts";
}

class SplitWeightGradVsWhole : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitWeightGradVsWhole, SumsTheSameProductsIndependentlyOfThreads) {
  const SplitCase& k = GetParam();
  if (k.conv.type == memory::data_type::bf16 && !dnnl_runs_bf16_kernels())
    GTEST_SKIP() << "oneDNN runs no bfloat16 kernels here";
  const auto pd = whole_batch(k.conv);
  std::mt19937_64 rng(17);
  std::vector<char> x = random_bytes(pd.src_desc(), rng), dy = random_bytes(pd.diff_dst_desc(), rng);
  const Grads whole = run_whole(pd, x, dy);
  std::unique_ptr<SplitWeightGrad> split =
      SplitWeightGrad::create(pd, {{k.conv.stride, k.conv.stride}, {0, 0}, {k.conv.pad, k.conv.pad}}, k.parts);
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(split->parts(), k.parts);
  Grads on_one, on_two;
  {
    ThreadCount one(1);
    on_one = run_split(*split, pd, x, dy);
  }
  {
    ThreadCount two(2);
    on_two = run_split(*split, pd, x, dy);
  }
  const double pixels = double(k.conv.batch) * k.conv.out_size() * k.conv.out_size();
  expect_same_sums(on_two.dw, whole.dw, pixels, "dw");
  expect_same_sums(on_two.db, whole.db, pixels, "db");
  EXPECT_EQ(std::memcmp(on_one.dw.data(), on_two.dw.data(), on_one.dw.size() * 4), 0) << "dw on 1 and 2 threads";
  EXPECT_EQ(std::memcmp(on_one.db.data(), on_two.db.data(), on_one.db.size() * 4), 0) << "db on 1 and 2 threads";
}

constexpr auto kF32 = memory::data_type::f32;
constexpr auto kBf16 = memory::data_type::bf16;

INSTANTIATE_TEST_SUITE_P(Shapes, SplitWeightGradVsWhole,
                         ::testing::Values(SplitCase{{4, 16, 9, 32, 3, 2, 1, kBf16}, 2},
                                           SplitCase{{7, 32, 8, 16, 3, 2, 1, kBf16}, 3},
                                           SplitCase{{6, 16, 10, 16, 3, 1, 1, kF32}, 2},
                                           SplitCase{{5, 16, 9, 16, 1, 2, 0, kF32}, 3}));

TEST(SplitWeightGrad, DeclinesFewerThanTwoParts) {
  const auto pd = whole_batch({1, 16, 8, 16, 3, 2, 1, kF32});
  EXPECT_EQ(SplitWeightGrad::create(pd, {{2, 2}, {0, 0}, {1, 1}}, 4), nullptr) << "one image";
  const auto two = whole_batch({2, 16, 8, 16, 3, 2, 1, kF32});
  EXPECT_EQ(SplitWeightGrad::create(two, {{2, 2}, {0, 0}, {1, 1}}, 1), nullptr) << "one part";
}

TEST(SplitWeightGrad, OnlyForStridedBfloat16KernelsOnAvx512Bf16) {
  EXPECT_TRUE(spins_between_threads("jit_bf16:avx512_core_bf16", {2, 2}));
  EXPECT_TRUE(spins_between_threads("jit_bf16:avx512_core_bf16", {1, 2}));
  EXPECT_FALSE(spins_between_threads("jit_bf16:avx512_core_bf16", {1, 1}));
  EXPECT_FALSE(spins_between_threads("jit:avx512_core", {2, 2}));
  EXPECT_FALSE(spins_between_threads("jit:avx512_core_amx", {2, 2}));
}

// The conv path with the split where it takes it (strided bfloat16 on
// AVX-512 BF16; as one primitive elsewhere): dw and db of bfloat16-exact
// NCHW x and dy against direct sums in double.
TEST(SplitWeightGrad, ConvWeightGradOfStridedBfloat16AgainstDirectSums) {
  if (!dnnl_runs_bf16_kernels()) GTEST_SKIP() << "oneDNN runs no bfloat16 kernels here";
  ThreadCount two(2);
  const int64_t n = 4, c = 16, size = 9, out = 32, k = 3, stride = 2, pad = 1, o_size = 5;
  DnnlConvShape shape{.geom = {.channels = c,
                               .height = size,
                               .width = size,
                               .kernel_h = k,
                               .kernel_w = k,
                               .stride_h = stride,
                               .stride_w = stride,
                               .pad_h = pad,
                               .pad_w = pad},
                      .batch = n,
                      .num_output = out,
                      .bf16 = true,
                      .bf16_x = true,
                      .bf16_y = true};
  std::unique_ptr<DnnlConv> conv = DnnlConv::create(shape);
  ASSERT_NE(conv, nullptr);
  ASSERT_FALSE(conv->runs_as_matmuls());
  RecordProperty("weight_grad_parts", conv->weight_grad_parts());
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> x(n * c * size * size), dy(n * out * o_size * o_size), w(out * c * k * k), y(dy.size());
  for (auto* v : {&x, &dy, &w})
    for (uint16_t& e : *v) e = to_bf16(u(rng));
  std::vector<float> bias(out, 0.f), dw(w.size(), NAN), db(out, NAN);
  conv->forward(x.data(), w.data(), bias.data(), y.data());
  conv->backward(x.data(), w.data(), dy.data(), nullptr, dw.data(), db.data(), false);
  std::vector<float> want_dw(dw.size()), want_db(out);
  for (int64_t o = 0; o < out; ++o) {
    double sum_dy = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < o_size * o_size; ++p) sum_dy += from_bf16(dy[(b * out + o) * o_size * o_size + p]);
    want_db[o] = static_cast<float>(sum_dy);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t kw = 0; kw < k; ++kw) {
          double s = 0;
          for (int64_t b = 0; b < n; ++b)
            for (int64_t oy = 0; oy < o_size; ++oy)
              for (int64_t ox = 0; ox < o_size; ++ox) {
                const int64_t iy = oy * stride - pad + kh, ix = ox * stride - pad + kw;
                if (iy < 0 || iy >= size || ix < 0 || ix >= size) continue;
                s += double(from_bf16(dy[((b * out + o) * o_size + oy) * o_size + ox])) *
                     from_bf16(x[((b * c + ch) * size + iy) * size + ix]);
              }
          want_dw[((o * c + ch) * k + kh) * k + kw] = static_cast<float>(s);
        }
  }
  const double pixels = double(n) * o_size * o_size;
  expect_same_sums(dw, want_dw, pixels, "dw");
  expect_same_sums(db, want_db, pixels, "db");
}

}  // namespace
}  // namespace poseidon::testing

#else

TEST(SplitWeightGrad, NeedsOneDnn) { GTEST_SKIP() << "built without oneDNN (libdnnl-dev)"; }

#endif  // POSEIDON_HAVE_DNNL
