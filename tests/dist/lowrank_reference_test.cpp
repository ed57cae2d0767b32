// Low-rank compression (dist/schemes/lowrank.h) on the ranks of the test job against
// a reference written apart from it: PowerSGD with error feedback in double
// precision, with its own products and its own Gram-Schmidt, fed every
// rank's gradients (each rank draws them all from their seeds). Only the
// starting Q is taken from the code under test. Over several iterations the
// exchange's gradient, its Q and every rank's error memory follow the
// reference's, and each rank's error memory is, after every iteration,
// exactly what compression left out of that rank's M: E = M - P Q^T.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/solver.h"
#include "dist/schemes/exchange_compute.h"
#include "dist/schemes/lowrank.h"
#include "tests/dist/test_world.h"

namespace poseidon::testing {
namespace {

constexpr int64_t kRows = 12, kCols = 9;
constexpr int kRank = 2;
constexpr int kIterations = 6;
// float arithmetic against double over kIterations of feedback: far below
// the O(1) differences a missing or wrong step makes.
constexpr double kTolerance = 1e-4;

using Matrix = std::vector<double>;  // row-major

// The gradients (weight, then bias) rank `rank` forms in iteration `it`.
std::vector<float> gradient_of(int rank, int it) {
  std::mt19937 rng(static_cast<uint32_t>(1000 * it + rank + 1));
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<float> g(kRows * kCols + kRows);
  for (float& v : g) v = unit(rng);
  return g;
}

// PowerSGD, the straightforward way, on every rank's M at once.
struct Reference {
  int ranks;
  Matrix q;                   // kCols x kRank
  std::vector<Matrix> error;  // per rank, kRows x kCols
  Matrix grad;                // P Q^T of the last step
  std::vector<double> bias;   // the mean bias gradient of the last step

  void step(int it) {
    std::vector<Matrix> m(ranks, Matrix(kRows * kCols));
    Matrix p(kRows * kRank, 0.0);
    bias.assign(kRows, 0.0);
    for (int r = 0; r < ranks; ++r) {
      const std::vector<float> g = gradient_of(r, it);
      for (int64_t i = 0; i < kRows * kCols; ++i) m[r][i] = g[i] + error[r][i];
      for (int64_t i = 0; i < kRows; ++i) bias[i] += g[kRows * kCols + i] / ranks;
      for (int64_t i = 0; i < kRows; ++i)
        for (int c = 0; c < kRank; ++c)
          for (int64_t j = 0; j < kCols; ++j) p[i * kRank + c] += m[r][i * kCols + j] * q[j * kRank + c];
    }
    for (int c = 0; c < kRank; ++c) {
      for (int k = 0; k < c; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < kRows; ++i) dot += p[i * kRank + c] * p[i * kRank + k];
        for (int64_t i = 0; i < kRows; ++i) p[i * kRank + c] -= dot * p[i * kRank + k];
      }
      double norm = 0;
      for (int64_t i = 0; i < kRows; ++i) norm += p[i * kRank + c] * p[i * kRank + c];
      for (int64_t i = 0; i < kRows; ++i) p[i * kRank + c] /= std::sqrt(norm);
    }
    std::fill(q.begin(), q.end(), 0.0);
    for (int r = 0; r < ranks; ++r)
      for (int64_t j = 0; j < kCols; ++j)
        for (int c = 0; c < kRank; ++c)
          for (int64_t i = 0; i < kRows; ++i) q[j * kRank + c] += m[r][i * kCols + j] * p[i * kRank + c] / ranks;
    grad.assign(kRows * kCols, 0.0);
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t j = 0; j < kCols; ++j)
        for (int c = 0; c < kRank; ++c) grad[i * kCols + j] += p[i * kRank + c] * q[j * kRank + c];
    for (int r = 0; r < ranks; ++r)
      for (int64_t i = 0; i < kRows * kCols; ++i) error[r][i] = m[r][i] - grad[i];
  }
};

// The exchange's arithmetic on this host, without the solver update: the
// gradients it leaves are what the test reads.
class NoUpdate : public dist::HostCompute {
 public:
  void update(Solver&, const std::vector<Param*>&, const dist::WorkDone& done) override { done(); }
};

Param param_of(const std::string& name, Shape shape) {
  Param p;
  p.name = name;
  p.shape = shape;
  p.value = Tensor(shape);
  p.grad = Tensor(shape);
  return p;
}

double largest_difference(const float* run, const Matrix& reference) {
  double worst = 0;
  for (size_t i = 0; i < reference.size(); ++i) worst = std::max(worst, std::abs(run[i] - reference[i]));
  return worst;
}

TEST(LowRankReference, FollowsAnIndependentPowerSgdWithErrorFeedback) {
  const dist::World& world = test_world();
  const int ranks = world.size(), me = world.rank();
  Param weight = param_of("fc.weight", {kRows, kCols}), bias = param_of("fc.bias", {kRows});
  Solver solver(SolverConfig{});
  NoUpdate compute;
  dist::LowRankExchange exchange(dist::Comm(world), solver, compute, {&weight, &bias}, kRank, "fc");

  const dist::LowRankState start = dist::initial_lowrank_state(weight.name, kRows, kCols, kRank);
  Reference ref{ranks, Matrix(start.q.begin(), start.q.end()), std::vector<Matrix>(ranks, Matrix(kRows * kCols, 0.0)),
                {}, {}};
  std::vector<float> errors(static_cast<size_t>(ranks) * kRows * kCols, 0.f), previous;
  for (int it = 0; it < kIterations; ++it) {
    const std::vector<float> g = gradient_of(me, it);
    std::copy(g.begin(), g.begin() + kRows * kCols, weight.grad.data());
    std::copy(g.begin() + kRows * kCols, g.end(), bias.grad.data());
    dist::InFlight in_flight;
    exchange.start(in_flight);
    while (!in_flight.empty()) in_flight.poll();
    // Every rank's error memory and Q, gathered on rank 0 (collectives first).
    previous = errors;
    size_t at = 0;
    exchange.stream_error(0, [&](const float* data, size_t n) {
      std::copy(data, data + n, errors.begin() + static_cast<std::ptrdiff_t>(at));
      at += n;
    });
    std::vector<float> q;
    exchange.q_entry().produce([&](const float* data, size_t n) { q.assign(data, data + n); });
    ref.step(it);

    EXPECT_LE(largest_difference(weight.grad.data(), ref.grad), kTolerance) << "P Q^T, iteration " << it;
    EXPECT_LE(largest_difference(bias.grad.data(), Matrix(ref.bias.begin(), ref.bias.end())), 1e-6)
        << "the bias, iteration " << it;
    EXPECT_LE(largest_difference(q.data(), ref.q), kTolerance) << "Q, iteration " << it;
    if (me != 0) continue;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<float> gr = gradient_of(r, it);
      const float* e = errors.data() + static_cast<size_t>(r) * kRows * kCols;
      const float* before = previous.data() + static_cast<size_t>(r) * kRows * kCols;
      // The feedback itself: E = M - P Q^T with M = G + E of the iteration before.
      int64_t wrong = 0;
      for (int64_t i = 0; i < kRows * kCols; ++i)
        if (e[i] != (gr[i] + before[i]) - weight.grad.data()[i]) ++wrong;
      EXPECT_EQ(wrong, 0) << "error memory entries of rank " << r << " are not M - P Q^T, iteration " << it;
      EXPECT_LE(largest_difference(e, ref.error[r]), kTolerance) << "rank " << r << "'s error, iteration " << it;
    }
  }
  // Compression left something out: the error memories are not zero.
  float largest = 0;
  for (float e : errors) largest = std::max(largest, std::abs(e));
  if (me == 0) {
    EXPECT_GT(largest, 0.1f);
  }
}

}  // namespace
}  // namespace poseidon::testing
