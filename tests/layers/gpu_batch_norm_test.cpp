// The GPU batch norm's training statistics are the channel moments of one
// pass over x (core/channel_moments.h): with momentum 1 the running mean and
// variance after a forward are the batch's, and they equal the CPU
// reference's mean and M2 / (count - 1), rounded to float32, bit for bit, on
// values whose mean is large next to their spread and on centred ones, in
// shapes of one chunk per channel and of many, [N, C] and [N, C, H, W], on
// float32 blobs and on bfloat16 ones (widened as they are read).
// (The layer's values against the CPU layer's: gpu_match_test.cpp.) Without
// a GPU it skips and says why (or fails, where a GPU is expected:
// gpu_required.h).
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/channel_moments.h"
#include "core/device_memory.h"
#include "core/registry.h"
#include "gpu_required.h"

namespace poseidon::testing {
namespace {

Param& find(Layer& layer, const std::string& name) {
  for (auto& p : layer.params())
    if (p.name == name) return p;
  throw std::runtime_error("no parameter " + name);
}

void expect_reference_statistics(const Shape& shape, bool large_mean, DType type) {
  const std::string what =
      shape_str(shape) + (large_mean ? " (mean 1e4)" : " (mean 0)") + " on " + dtype_name(type) + " blobs";
  const Device gpu = Device::cuda(0);
  auto layer =
      LayerRegistry::instance().create(ConfigNode::parse("{name: bn, type: batch_norm, momentum: 1}", "case"), gpu);
  const Shape out_shape = layer->reshape({shape})[0];
  for (auto& p : layer->params()) {
    p.value = Tensor(p.shape, gpu);
    p.value.fill(p.init.value);
    if (p.learnable) p.grad = Tensor(p.shape, gpu);
  }
  Tensor x(shape);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal(0.0, large_mean ? 0.01 : 1.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    x[i] = static_cast<float>((large_mean ? 1e4 : 0.0) + normal(rng));
    if (type == DType::bf16) x[i] = from_bf16(to_bf16(x[i]));
  }

  Tensor in = x.to(type).to(gpu), out(out_shape, gpu, type);
  LayerIO io;
  io.in = {&in};
  io.out = {&out};
  RunContext ctx{Phase::train, &rng, gpu};
  layer->forward(io, ctx);
  const Tensor running_mean = find(*layer, "running_mean").value.to(Device{});
  const Tensor running_var = find(*layer, "running_var").value.to(Device{});

  size_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= static_cast<size_t>(shape[d]);
  const size_t channels = static_cast<size_t>(shape[1]);
  const ChannelMomentsPlan p = plan_channel_moments(static_cast<size_t>(shape[0]), channels, inner);
  std::vector<Moments> want(channels);
  channel_moments_reference(want.data(), x.data(), p);
  for (size_t c = 0; c < channels; ++c) {
    const float mean = static_cast<float>(want[c].mean);
    const float var = static_cast<float>(want[c].m2 / (want[c].count - 1));
    EXPECT_EQ(float_bits(running_mean[c]), float_bits(mean))
        << what << " channel " << c << ": gpu " << running_mean[c] << " reference " << mean;
    EXPECT_EQ(float_bits(running_var[c]), float_bits(var))
        << what << " channel " << c << ": gpu " << running_var[c] << " reference " << var;
  }
}

TEST(CudaLayers, BatchNormOnePassStatisticsEqualTheReferenceBitForBit) {
  POSEIDON_SKIP_WITHOUT_GPU();
  for (DType type : {DType::f32, DType::bf16})
    for (bool large_mean : {true, false})
      for (const Shape& shape : {Shape{4, 5, 3, 7}, Shape{8, 3, 33, 65}, Shape{300, 6}, Shape{5000, 2}}) {
        SCOPED_TRACE(shape_str(shape));
        expect_reference_statistics(shape, large_mean, type);
      }
}

}  // namespace
}  // namespace poseidon::testing
