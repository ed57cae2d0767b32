// The operands that conv and fc hand oneDNN's bfloat16 kernels as they are:
// each weight's rounded copy, which the update writes (core/rounded_weight.h),
// and bfloat16 blobs, read in place instead of through float32. The copy
// holds what oneDNN's own rounding of the float32 weight would give (they
// round alike apart from float32 denormals, which oneDNN flushes), and a net
// trained on the copies and on the blocked weights its layers keep takes,
// step after step, bit for bit the step of a fresh net that holds the same
// values and can only round them itself.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/blob_types.h"
#include "core/net.h"
#include "core/net_fixtures.h"
#include "core/solver.h"
#include "layers/dnnl_support.h"

namespace poseidon::testing {
namespace {

#ifdef POSEIDON_HAVE_DNNL
// Normal numbers of every exponent, ties both ways, the largest and smallest
// normals, infinities, zeros and NaNs.
std::vector<float> values_without_denormals() {
  std::vector<float> v = {1.00390625f,  1.01171875f,  -1.00390625f, 3.3895314e38f, -3.3895314e38f,
                          std::numeric_limits<float>::max(),  std::numeric_limits<float>::min(),
                          -std::numeric_limits<float>::min(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 0.f, -0.f,
                          std::numeric_limits<float>::quiet_NaN(), bits_float(0x7f800001u), bits_float(0xffc12345u)};
  std::mt19937 rng(17);
  std::uniform_int_distribution<uint32_t> exponent(1, 254), mantissa(0, (1u << 23) - 1), sign(0, 1);
  for (int i = 0; i < 100000; ++i) v.push_back(bits_float(sign(rng) << 31 | exponent(rng) << 23 | mantissa(rng)));
  return v;
}

// Where oneDNN runs bfloat16 kernels (from AVX-512 on): its reorders before
// AVX-512 turn -0 into +0, but nothing there reads them.
TEST(Bf16OneDnnOperands, OneDnnRoundsAsTheRoundedCopiesDo) {
  using dnnl::memory;
  if (!dnnl_uses_avx512()) GTEST_SKIP() << "no bfloat16 kernels in oneDNN before AVX-512";
  const std::vector<float> v = values_without_denormals();
  const memory::dims dims{static_cast<int64_t>(v.size())};
  memory from({dims, memory::data_type::f32, memory::format_tag::x}, dnnl_cpu_engine(), const_cast<float*>(v.data()));
  memory to({dims, memory::data_type::bf16, memory::format_tag::x}, dnnl_cpu_engine());
  dnnl::stream stream(dnnl_cpu_engine());
  dnnl::reorder(from, to).execute(stream, from, to);
  stream.wait();
  std::vector<uint16_t> ours(v.size());
  round_into_bf16(v.data(), ours.data(), static_cast<int64_t>(v.size()));
  const uint16_t* theirs = static_cast<const uint16_t*>(to.get_data_handle());
  for (size_t i = 0; i < v.size(); ++i) {
    // The vectorised rounding (AVX-512 where the CPU has it) is core/bf16.h's.
    ASSERT_EQ(ours[i], to_bf16(v[i])) << "element " << i << ", float bits " << std::hex << float_bits(v[i]);
    const bool nan = (ours[i] & 0x7fff) > 0x7f80;
    if (nan) {
      ASSERT_GT(theirs[i] & 0x7fff, 0x7f80) << "a NaN, element " << i;
      continue;
    }
    ASSERT_EQ(theirs[i], ours[i]) << "element " << i << ", float bits " << std::hex << float_bits(v[i]);
  }
}
#endif

// Convolutions on each of oneDNN's paths in bf16: direct kernels on a
// float32 input (conv1) and on bfloat16 blobs (conv2), matrix products on
// small images (conv3), a strided 1x1 convolution of subsampled pixels
// (conv4); then two fc layers, one on a bfloat16 input.
constexpr const char* kModel =
    "name: operands\n"
    "inputs: {data: [3, 12, 12], label: []}\n"
    "layers:\n"
    "  - {name: conv1, type: conv, num_output: 16, kernel_size: 3, pad: 1}\n"
    "  - {name: relu1, type: relu}\n"
    "  - {name: pool1, type: pool, kernel_size: 2, stride: 2}\n"
    "  - {name: conv2, type: conv, num_output: 16, kernel_size: 3, pad: 1}\n"
    "  - {name: relu2, type: relu}\n"
    "  - {name: conv3, type: conv, num_output: 32, kernel_size: 3, stride: 2}\n"
    "  - {name: relu3, type: relu}\n"
    "  - {name: conv4, type: conv, num_output: 32, kernel_size: 1, stride: 2}\n"
    "  - {name: fc1, type: fc, num_output: 32}\n"
    "  - {name: relu4, type: relu}\n"
    "  - {name: fc2, type: fc, num_output: 3}\n"
    "  - {name: loss, type: softmax_loss, inputs: [fc2, label]}\n";

std::unique_ptr<Net> bf16_net(bool fuse_relus) {
  auto net = std::make_unique<Net>(ConfigNode::parse(kModel, "operands.yaml"), 8);
  if (fuse_relus) net->fuse_relus();
  net->set_precision(Precision::bf16);
  net->init_params(5);
  return net;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel() || a.dtype() != b.dtype()) return false;
  const void* x = a.dtype() == DType::bf16 ? static_cast<const void*>(a.bf16_data()) : a.data();
  const void* y = b.dtype() == DType::bf16 ? static_cast<const void*>(b.bf16_data()) : b.data();
  return std::memcmp(x, y, a.bytes()) == 0;
}

TEST(Bf16OneDnnOperands, EveryStepIsAFreshNetsStepBitwise) {
  for (bool fuse : {false, true}) {
    SCOPED_TRACE(fuse ? "ReLUs fused" : "ReLUs apart");
    auto net = bf16_net(fuse);
    Solver solver(SolverConfig::parse(ConfigNode::parse("{type: sgd, lr: 0.05, momentum: 0.9}", "solver.yaml")));
    for (int64_t it = 0; it < 4; ++it) {
      // The fresh net's layers have no state of earlier steps, and round
      // every weight from its value.
      auto fresh = bf16_net(fuse);
      fresh->flat_values().copy_from(net->flat_values());
      values_written(fresh->params());
      feed(*net, 30 + it);
      feed(*fresh, 30 + it);
      if (it > 0) ASSERT_TRUE(net->find_param("fc1.weight")->rounded.current) << "the update wrote no copy";
      RunContext ctx;
      const float loss = net->forward(ctx);
      // oneDNN's bfloat16 kernels read the copies as bfloat16, the float32
      // engines on rounded operands as rounded floats.
      const DType copies = dnnl_runs_bf16_kernels() ? DType::bf16 : DType::f32;
      for (const char* w : {"conv1.weight", "conv2.weight", "conv3.weight", "conv4.weight", "fc1.weight", "fc2.weight"})
        ASSERT_EQ(net->find_param(w)->rounded.copy.dtype(), copies) << w;
      ASSERT_EQ(float_bits(loss), float_bits(fresh->forward(ctx))) << "loss, iteration " << it;
      for (const char* blob : {"conv1", "conv2", "conv3", "conv4", "fc1", "fc2"})
        ASSERT_TRUE(same_bits(net->blob(blob).value, fresh->blob(blob).value)) << blob << ", iteration " << it;
      NullSink sink;
      net->backward(ctx, sink);
      fresh->backward(ctx, sink);
      ASSERT_TRUE(same_bits(net->flat_grads(), fresh->flat_grads())) << "gradients, iteration " << it;
      solver.update_all(net->params());
      solver.set_iteration(it + 1);
    }
  }
}

}  // namespace
}  // namespace poseidon::testing
