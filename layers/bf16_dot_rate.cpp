// Measures vdpbf16ps against vfmadd231ps (see bf16_dot_rate.h): each runs
// twelve independent chains of accumulations, enough to cover either
// instruction's latency on every core that has it, and the two alternate
// for 20 rounds, the fastest round of each counting (other work on the core
// only ever slows a round). Three such measurements a millisecond apart,
// the highest counting: one rank of an MPI job, beside another test run,
// once measured the dot product below its rate through all 20 rounds.
#include "layers/bf16_dot_rate.h"

#include <algorithm>
#include <chrono>
#include <thread>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define POSEIDON_PROBE_BF16 1
#endif

namespace poseidon {

#ifdef POSEIDON_PROBE_BF16
namespace {

constexpr int kChains = 12, kSteps = 1000, kRounds = 20, kMeasurements = 3;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The accumulators' sum goes to a volatile so that the loops are kept.
__attribute__((target("avx512f"))) void keep(const __m512* acc) {
  __m512 sum = acc[0];
  for (int k = 1; k < kChains; ++k) sum = _mm512_add_ps(sum, acc[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  volatile float sink = lanes[0];
  for (int i = 1; i < 16; ++i) sink = sink + lanes[i];
}

__attribute__((target("avx512f,avx512bf16"))) double time_bf16_dots() {
  __m512 acc[kChains];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const __m512bh ones = (__m512bh)_mm512_set1_epi16(0x3f80);  // bfloat16 1.0
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < kSteps; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], ones, ones);
  const double s = seconds_since(start);
  keep(acc);
  return s;
}

__attribute__((target("avx512f"))) double time_float_fmas() {
  __m512 acc[kChains];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const __m512 ones = _mm512_set1_ps(1.f);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < kSteps; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(ones, ones, acc[k]);
  const double s = seconds_since(start);
  keep(acc);
  return s;
}

double measure_once() {
  double bf16 = 1e9, fp32 = 1e9;
  for (int r = 0; r < kRounds; ++r) {
    fp32 = std::min(fp32, time_float_fmas());
    bf16 = std::min(bf16, time_bf16_dots());
  }
  return 2.0 * fp32 / bf16;  // vdpbf16ps does 32 multiply-adds, vfmadd231ps 16
}

double measure() {
  if (!__builtin_cpu_supports("avx512bf16")) return 0.0;
  double rate = 0.0;
  for (int m = 0; m < kMeasurements; ++m) {
    if (m > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rate = std::max(rate, measure_once());
  }
  return rate;
}

}  // namespace

double bf16_dot_rate() {
  static const double rate = measure();
  return rate;
}
#else
double bf16_dot_rate() { return 0.0; }
#endif

}  // namespace poseidon
