// Dropout: gradient cases in both phases, the mask's statistics (the share
// dropped, neighbours independent, a new mask each forward), its
// reproducibility with any thread count, and the ratio check. The mask's
// counter function (layers/dropout_mask.h) against SplitMix64's published
// outputs, the CPU layer's mask made of it element for element, and the GPU
// layer's, which computes the same function on the device, equal to the
// CPU's bit for bit (DropoutMask.GpuMatchesCpuBitForBit), step after step
// (CudaDropout.SuccessiveStepsReadTheirOwnDraw).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "core/registry.h"
#include "gpu_required.h"
#include "layers/dropout_mask.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

GRAD_CASE("dropout_train", "{name: d, type: dropout, ratio: 0.3}", {{2, 3, 4, 5}}, {}, true);
GRAD_CASE("dropout_test", "{name: d, type: dropout, ratio: 0.3}", {{2, 3, 4, 5}}, {}, false);

namespace {

std::unique_ptr<Layer> make_dropout(const std::string& yaml) {
  return LayerRegistry::instance().create(ConfigNode::parse(yaml, "test"));
}

// Nonzero inputs, so a zero output can only come from the mask.
Tensor nonzero_input(int64_t n) {
  Tensor x({n});
  for (int64_t i = 0; i < n; ++i) x[i] = 1.f + static_cast<float>(i % 7);
  return x;
}

Tensor run(Layer& layer, const Tensor& x, Phase phase, uint64_t seed) {
  Tensor y(x.shape());
  layer.reshape({x.shape()});
  std::mt19937_64 rng(seed);
  RunContext ctx{phase, &rng, {}};
  LayerIO io{{&x}, {&y}, {}, {}};
  layer.forward(io, ctx);
  return y;
}

}  // namespace

TEST(Dropout, TestPhaseIsIdentity) {
  auto layer = make_dropout("{name: d, type: dropout, ratio: 0.5}");
  Tensor x = nonzero_input(1000);
  Tensor y = run(*layer, x, Phase::test, 1);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y[i], x[i]) << i;
}

TEST(Dropout, TrainZeroesAboutRatioAndScalesTheRest) {
  const float ratio = 0.3f;
  auto layer = make_dropout("{name: d, type: dropout, ratio: 0.3}");
  const int64_t n = 20000;
  Tensor x = nonzero_input(n);
  Tensor y = run(*layer, x, Phase::train, 5);
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] == 0.f) {
      ++zeros;
    } else {
      ASSERT_FLOAT_EQ(y[i], x[i] / (1.f - ratio)) << i;
    }
  }
  // The binomial standard deviation is about 0.0032; this allows six of them.
  EXPECT_NEAR(static_cast<double>(zeros) / n, ratio, 0.02);
}

TEST(Dropout, SameSeedGivesSameMask) {
  auto layer = make_dropout("{name: d, type: dropout}");
  Tensor x = nonzero_input(500);
  Tensor a = run(*layer, x, Phase::train, 11);
  Tensor b = run(*layer, x, Phase::train, 11);
  Tensor c = run(*layer, x, Phase::train, 12);
  int64_t differences = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(a[i], b[i]) << i;
    differences += a[i] != c[i];
  }
  EXPECT_GT(differences, 0);
}

// The mask is drawn in parallel above 32768 elements: one thread or two
// give the same one.
TEST(Dropout, ThreadCountDoesNotChangeTheMask) {
  auto layer = make_dropout("{name: d, type: dropout, ratio: 0.4}");
  Tensor x = nonzero_input(100000);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensor one = run(*layer, x, Phase::train, 21);
  omp_set_num_threads(2);
  Tensor two = run(*layer, x, Phase::train, 21);
  omp_set_num_threads(threads);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(one[i], two[i]) << i;
}

// Drops of neighbouring elements, and of the same element in two successive
// forwards of one run, are independent: each pair is dropped together a
// quarter of the time at ratio 0.5.
TEST(Dropout, NeighboursAndSuccessiveMasksAreIndependent) {
  auto layer = make_dropout("{name: d, type: dropout, ratio: 0.5}");
  const int64_t n = 200000;
  Tensor x = nonzero_input(n), first(x.shape()), second(x.shape());
  layer->reshape({x.shape()});
  std::mt19937_64 rng(8);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io_first{{&x}, {&first}, {}, {}}, io_second{{&x}, {&second}, {}, {}};
  layer->forward(io_first, ctx);
  layer->forward(io_second, ctx);
  int64_t dropped = 0, neighbours = 0, far = 0, successive = 0;
  for (int64_t i = 0; i + 64 < n; ++i) {
    dropped += first[i] == 0.f;
    neighbours += first[i] == 0.f && first[i + 1] == 0.f;
    far += first[i] == 0.f && first[i + 64] == 0.f;
    successive += first[i] == 0.f && second[i] == 0.f;
  }
  const double pairs = static_cast<double>(n - 64);
  // Standard deviations: about 0.0011 for the share dropped, 0.001 for a pair's.
  EXPECT_NEAR(dropped / pairs, 0.5, 0.006);
  EXPECT_NEAR(neighbours / pairs, 0.25, 0.006);
  EXPECT_NEAR(far / pairs, 0.25, 0.006);
  EXPECT_NEAR(successive / pairs, 0.25, 0.006);
}

TEST(Dropout, BackwardAppliesTheForwardMaskAndAccumulates) {
  auto layer = make_dropout("{name: d, type: dropout, ratio: 0.5}");
  Tensor x = nonzero_input(200), y(x.shape()), dy(x.shape()), dx(x.shape());
  layer->reshape({x.shape()});
  std::mt19937_64 rng(3);
  RunContext ctx{Phase::train, &rng, {}};
  LayerIO io{{&x}, {&y}, {&dy}, {&dx}};
  layer->forward(io, ctx);
  dy.fill(1.f);
  dx.fill(1.f);
  layer->backward(io, ctx);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_FLOAT_EQ(dx[i], 1.f + y[i] / x[i]) << i;
}

TEST(DropoutMask, CounterFunctionIsSplitMix64) {
  // SplitMix64 started at 0 (Vigna's reference generator) outputs these
  // three first; element i of seed 0 is the generator's output i + 1.
  const uint64_t published[] = {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL, 0x06c45d188009454fULL};
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(dropout_mask::element_bits(0, i), published[i] >> 11) << i;
  EXPECT_EQ(dropout_mask::drop_threshold(0.5), uint64_t(1) << 52);
  EXPECT_EQ(dropout_mask::drop_threshold(0.0), 0u);
}

TEST(DropoutMask, CpuLayerAppliesTheCounterFunctionOfItsOneDraw) {
  auto layer = make_dropout("{name: d, type: dropout, ratio: 0.3}");
  const Tensor x = nonzero_input(5000);
  const Tensor y = run(*layer, x, Phase::train, 17);
  const uint64_t draw = std::mt19937_64(17)();
  const uint64_t threshold = dropout_mask::drop_threshold(0.3);
  const float scale = static_cast<float>(1.0 / (1.0 - 0.3));
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(y[i], x[i] * dropout_mask::element(draw, uint64_t(i), threshold, scale)) << i;
}

// Forward and backward (adding into a nonzero input gradient) of the GPU
// layer against the CPU layer's, from the same draw: bitwise equal, over
// more elements than one pass of the kernels' grid covers.
TEST(DropoutMask, GpuMatchesCpuBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const int64_t n = (int64_t(1) << 23) + 13;
  Tensor x({n}), dy({n}), dx0({n});
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 0.25f * float(i % 13) - 1.f;
    dy[i] = 0.5f * float(i % 7) - 1.5f;
    dx0[i] = float(i % 5);
  }
  auto pass = [&](const Device& device, Tensor& y, Tensor& dx) {
    auto layer = LayerRegistry::instance().create(ConfigNode::parse("{name: d, type: dropout, ratio: 0.4}", "test"),
                                                  device);
    Tensor dev_x = x.to(device), dev_y(x.shape(), device), dev_dy = dy.to(device), dev_dx = dx0.to(device);
    layer->reshape({x.shape()});
    std::mt19937_64 rng(23);
    RunContext ctx{Phase::train, &rng, device};
    LayerIO io{{&dev_x}, {&dev_y}, {&dev_dy}, {&dev_dx}};
    layer->forward(io, ctx);
    layer->backward(io, ctx);
    y = dev_y.to(Device{});
    dx = dev_dx.to(Device{});
  };
  Tensor cpu_y, cpu_dx, gpu_y, gpu_dx;
  pass(Device{}, cpu_y, cpu_dx);
  pass(Device::cuda(0), gpu_y, gpu_dx);
  EXPECT_EQ(0, std::memcmp(cpu_y.data(), gpu_y.data(), n * sizeof(float))) << "forward";
  EXPECT_EQ(0, std::memcmp(cpu_dx.data(), gpu_dx.data(), n * sizeof(float))) << "backward";
}

// Successive training steps of one GPU layer, more than the pinned slots
// its seed goes up through (device_memory::StepUpload), each forward and
// backward against the CPU layer's from the same generator, bitwise: every
// step's kernels read that step's draw from GPU memory, not an earlier one's.
TEST(CudaDropout, SuccessiveStepsReadTheirOwnDraw) {
  POSEIDON_SKIP_WITHOUT_GPU();
  const int64_t n = 4099;
  Tensor x({n}), dy({n});
  for (int64_t i = 0; i < n; ++i) x[i] = 0.25f * float(i % 13) - 1.f, dy[i] = 0.5f * float(i % 7) - 1.5f;
  auto steps = [&](const Device& device) {
    auto layer =
        LayerRegistry::instance().create(ConfigNode::parse("{name: d, type: dropout, ratio: 0.4}", "test"), device);
    layer->reshape({x.shape()});
    std::mt19937_64 rng(29);
    RunContext ctx{Phase::train, &rng, device};
    Tensor dev_x = x.to(device), dev_dy = dy.to(device);
    std::vector<Tensor> outputs;
    for (int step = 0; step < 6; ++step) {
      Tensor dev_y(x.shape(), device), dev_dx({n}, device);
      LayerIO io{{&dev_x}, {&dev_y}, {&dev_dy}, {&dev_dx}};
      layer->forward(io, ctx);
      layer->backward(io, ctx);
      outputs.push_back(dev_y.to(Device{}));
      outputs.push_back(dev_dx.to(Device{}));
    }
    return outputs;
  };
  const std::vector<Tensor> cpu = steps(Device{}), gpu = steps(Device::cuda(0));
  for (size_t k = 0; k < cpu.size(); ++k)
    EXPECT_EQ(0, std::memcmp(cpu[k].data(), gpu[k].data(), n * sizeof(float)))
        << "step " << k / 2 << (k % 2 ? " backward" : " forward");
  EXPECT_NE(0, std::memcmp(cpu[0].data(), cpu[2].data(), n * sizeof(float))) << "the steps drew the same mask";
}

TEST(Dropout, RejectsRatioOutsideZeroToOne) {
  for (const char* ratio : {"1", "1.5", "-0.1"}) {
    std::string yaml = std::string("{name: d, type: dropout, ratio: ") + ratio + "}";
    try {
      make_dropout(yaml);
      ADD_FAILURE() << "ratio " << ratio << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("ratio"), std::string::npos) << e.what();
    }
  }
}

}  // namespace poseidon::testing
