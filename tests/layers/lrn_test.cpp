// Local response normalisation: gradient cases (odd and even windows, wider
// than the channels, 2-D input), values against the definition computed here
// in double, and the keys' checks.
#include <gtest/gtest.h>

#include <cmath>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("lrn_alexnet", "{name: n, type: lrn, local_size: 5, alpha: 0.5, beta: 0.75, k: 2}", {{2, 7, 3, 2}});
GRAD_CASE("lrn_even_window", "{name: n, type: lrn, local_size: 4, alpha: 0.3, beta: 1.5, k: 1}", {{2, 6, 2, 2}});
GRAD_CASE("lrn_window_wider_than_channels", "{name: n, type: lrn, local_size: 7, alpha: 1, beta: 0.5}", {{3, 3, 2}});
GRAD_CASE("lrn_2d", "{name: n, type: lrn, local_size: 3, alpha: 0.2}", {{4, 5}});

namespace {

// y = x / (k + alpha / n * sum over [c - n/2, c + (n-1)/2] of x^2)^beta, in double.
double reference(const Tensor& x, int64_t i, int64_t channels, int64_t spatial, int size, double alpha, double beta,
                 double k) {
  const int64_t c = (i / spatial) % channels, base = i - c * spatial;
  double sum = 0;
  for (int64_t w = c - size / 2; w <= c + (size - 1) / 2; ++w)
    if (w >= 0 && w < channels) sum += double(x[base + w * spatial]) * x[base + w * spatial];
  return x[i] / std::pow(k + alpha / size * sum, beta);
}

// Inputs shaped like a sine of the given frequency and amplitude.
Tensor pattern(const Shape& shape, float frequency, float amplitude) {
  Tensor x(shape);
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = std::sin(frequency * i) * amplitude;
  return x;
}

// The layer's output for pattern(shape, frequency, amplitude).
Tensor lrn_forward(const std::string& yaml, const Shape& shape, float frequency, float amplitude) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
  layer->reshape({shape});
  Tensor x = pattern(shape, frequency, amplitude), y(shape);
  LayerIO io{{&x}, {&y}, {}, {}};
  RunContext ctx;
  layer->forward(io, ctx);
  return y;
}

}  // namespace

TEST(Lrn, MatchesItsDefinition) {
  for (int size : {1, 2, 3, 5, 6}) {
    SCOPED_TRACE(size);
    const std::string yaml =
        "{name: n, type: lrn, local_size: " + std::to_string(size) + ", alpha: 0.7, beta: 0.6, k: 1.5}";
    const Shape shape = {2, 6, 3, 3};
    const Tensor x = pattern(shape, 0.9f, 2.f), y = lrn_forward(yaml, shape, 0.9f, 2.f);
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(y[i], reference(x, i, 6, 9, size, 0.7, 0.6, 1.5), 1e-6) << i;
  }
}

// Large enough for the threaded loops.
TEST(Lrn, LargeInputMatchesItsDefinition) {
  const Shape shape = {2, 16, 32, 33};
  const Tensor x = pattern(shape, 0.3f, 5.f),
               y = lrn_forward("{name: n, type: lrn, alpha: 0.01, k: 2}", shape, 0.3f, 5.f);
  for (int64_t i = 0; i < x.numel(); i += 101)
    EXPECT_NEAR(y[i], reference(x, i, 16, 32 * 33, 5, 0.01, 0.75, 2), 1e-5) << i;
}

TEST(Lrn, RejectsBadKeysAndInputs) {
  auto make = [](const std::string& yaml) { return LayerRegistry::instance().create(ConfigNode::parse(yaml, "t")); };
  EXPECT_THROW(make("{name: n, type: lrn, local_size: 0}"), ConfigError);
  EXPECT_THROW(make("{name: n, type: lrn, k: 0}"), ConfigError);
  EXPECT_THROW(make("{name: n, type: lrn, alpha: -1}"), ConfigError);
  EXPECT_THROW(make("{name: n, type: lrn}")->reshape({{8}}), ConfigError);
}

}  // namespace poseidon::testing
