// The fc layer's blocked bfloat16 weights (layers/bf16_pack.h): every element
// of both copies of a rounded W, padding included, against the layout's
// index formula, on shapes that leave partial tiles, blocks and
// pairs; and the formula against oneDNN's own reorder into the layout its
// matrix products ask for, where this CPU's products ask for it.
#include "layers/bf16_pack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/bf16.h"
#include "layers/dnnl_support.h"
#include "uniform_values.h"

namespace poseidon::testing {
namespace {

struct Extent {
  int64_t rows, cols;
};

std::vector<float> random_weights(const Extent& e, uint64_t seed) { return uniform_values(e.rows * e.cols, seed, 2.f); }

// W's rounded copy, as the update writes it (core/rounded_weight.h).
std::vector<uint16_t> rounded(const std::vector<float>& w) {
  std::vector<uint16_t> bits(w.size());
  for (size_t i = 0; i < w.size(); ++i) bits[i] = to_bf16(w[i]);
  return bits;
}

// B[k][n] of a packed copy, or 0 in its padding, as the formula places it.
std::vector<uint16_t> expected_packing(const PackedB& b, const auto& element) {
  std::vector<uint16_t> want(b.elements(), 0);
  for (int64_t k = 0; k < b.k; ++k)
    for (int64_t n = 0; n < b.n; ++n) want[b.offset(k, n)] = to_bf16(element(k, n));
  return want;
}

// A copy's buffer that starts on a 64-byte boundary, where the kernel
// streams its stores, or 2 bytes past one, where it cannot.
class CopyBuffer {
 public:
  CopyBuffer(int64_t elements, bool aligned, uint16_t fill) : storage_(elements + 64, fill) {
    const uintptr_t start = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + ((64 - start % 64) % 64) / 2 + (aligned ? 0 : 1);
  }
  uint16_t* data() { return data_; }
  uint16_t operator[](int64_t i) const { return data_[i]; }

 private:
  std::vector<uint16_t> storage_;
  uint16_t* data_;
};

class Bf16Pack : public ::testing::TestWithParam<Extent> {
 protected:
  void SetUp() override {
    if (!bf16_pack_supported()) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
};

TEST_P(Bf16Pack, WritesBothCopiesAndTheirPadding) {
  const Extent e = GetParam();
  std::vector<float> w = random_weights(e, 5);
  // Ties to even both ways, and the specials, somewhere in the matrix.
  const std::vector<float> specials = {1.00390625f, 1.01171875f, std::numeric_limits<float>::quiet_NaN(),
                                       std::numeric_limits<float>::infinity(), -0.f};
  for (size_t i = 0; i < specials.size() && i < w.size(); ++i) w[(i * 7919) % w.size()] = specials[i];
  const PackedB transposed{e.cols, e.rows}, plain{e.rows, e.cols};
  const std::vector<uint16_t> want_t =
      expected_packing(transposed, [&](int64_t k, int64_t n) { return w[n * e.cols + k]; });
  const std::vector<uint16_t> want = expected_packing(plain, [&](int64_t k, int64_t n) { return w[k * e.cols + n]; });
  for (const bool aligned : {true, false}) {
    // Stale values where padding belongs: the kernel must write its zeros.
    CopyBuffer got_t(transposed.elements(), aligned, 0xffff), got(plain.elements(), aligned, 0xffff);
    pack_bf16_weights(rounded(w).data(), e.rows, e.cols, got_t.data(), got.data());
    for (int64_t i = 0; i < transposed.elements(); ++i)
      ASSERT_EQ(got_t[i], want_t[i]) << "W^T copy, element " << i << " of " << e.rows << "x" << e.cols
                                     << (aligned ? ", aligned" : ", unaligned");
    for (int64_t i = 0; i < plain.elements(); ++i)
      ASSERT_EQ(got[i], want[i]) << "W copy, element " << i << " of " << e.rows << "x" << e.cols
                                 << (aligned ? ", aligned" : ", unaligned");
  }
}

TEST_P(Bf16Pack, WritesOneCopyAlone) {
  const Extent e = GetParam();
  const std::vector<uint16_t> w = rounded(random_weights(e, 6));
  const PackedB transposed{e.cols, e.rows}, plain{e.rows, e.cols};
  std::vector<uint16_t> both_t(transposed.elements()), both(plain.elements());
  std::vector<uint16_t> alone_t(transposed.elements()), alone(plain.elements());
  pack_bf16_weights(w.data(), e.rows, e.cols, both_t.data(), both.data());
  pack_bf16_weights(w.data(), e.rows, e.cols, alone_t.data(), nullptr);
  pack_bf16_weights(w.data(), e.rows, e.cols, nullptr, alone.data());
  EXPECT_EQ(alone_t, both_t);
  EXPECT_EQ(alone, both);
}

#ifdef POSEIDON_HAVE_DNNL
// oneDNN's reorder of the row-major float32 W into the layout of the fc
// layer's forward product (B = W^T) and its backward-data product (B = W).
TEST_P(Bf16Pack, MatchesOneDnnsReorderIntoItsLayout) {
  using dnnl::memory;
  const Extent e = GetParam();
  const std::vector<float> w = random_weights(e, 7);
  const int64_t batch = 32;
  const memory::data_type bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
  for (const bool transposed : {true, false}) {
    const PackedB b = transposed ? PackedB{e.cols, e.rows} : PackedB{e.rows, e.cols};
    const dnnl::matmul::primitive_desc pd({memory::desc({batch, b.k}, bf16, memory::format_tag::ab),
                                           memory::desc({b.k, b.n}, bf16, memory::format_tag::any),
                                           memory::desc({batch, b.n}, f32, memory::format_tag::ab)},
                                          dnnl::primitive_attr(), dnnl_cpu_engine());
    if (!dnnl_is_packed(pd.weights_desc(), b)) GTEST_SKIP() << "this CPU's bf16 products use another layout";
    memory from({{b.k, b.n}, f32, transposed ? memory::format_tag::ba : memory::format_tag::ab}, dnnl_cpu_engine(),
                const_cast<float*>(w.data()));
    memory to(pd.weights_desc(), dnnl_cpu_engine());
    dnnl::stream stream(dnnl_cpu_engine());
    dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
    std::vector<uint16_t> got(b.elements());
    pack_bf16_weights(rounded(w).data(), e.rows, e.cols, transposed ? got.data() : nullptr,
                      transposed ? nullptr : got.data());
    const uint16_t* want = static_cast<const uint16_t*>(to.get_data_handle());
    for (int64_t i = 0; i < b.elements(); ++i)
      ASSERT_EQ(got[i], want[i]) << (transposed ? "W^T" : "W") << " copy, element " << i;
  }
}
#endif

INSTANTIATE_TEST_SUITE_P(Shapes, Bf16Pack,
                         ::testing::Values(Extent{1, 1}, Extent{5, 70}, Extent{33, 65}, Extent{64, 64},
                                           Extent{100, 300}, Extent{2065, 31}, Extent{10, 2048}));

}  // namespace
}  // namespace poseidon::testing
