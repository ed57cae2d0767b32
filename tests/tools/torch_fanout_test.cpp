// Nets in which a blob fans out, against PyTorch: conv c1's output feeds a
// ReLU, a max pooling or a dropout and also a second convolution, so that
// its gradient is the sum of two layers' input gradients
// (tests/torch/fanout_reference.py). A layer that overwrote its input
// gradient rather than adding to it would drop the other branch's share; a
// unit test of the layer alone cannot see that, a net can. Each net runs one
// forward and two backwards (the second over the first one's gradients,
// which each blob's first writer must overwrite) in float32 and in bf16 on
// the CPU, and its loss, its parameters' gradients and c1's output gradient
// must match PyTorch's:
//  - float32 against float64 PyTorch: every element within 1e-4 of the
//    tensor's largest magnitude (float32 rounding leaves some 1e-6);
//  - bf16 against float64 PyTorch, with PyTorch's own bfloat16 autocast
//    as the measure of what bfloat16 costs: ||ours - exact|| at most
//    2 ||autocast - exact|| + 2^-8 ||exact|| (two independent bfloat16
//    errors of autocast's size, plus one rounding), loss within 2^-7.
// A lost branch moves c1's gradient by tens of percent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/net.h"
#include "core/precision.h"
#include "core/safetensors.h"
#include "tools/cli_runner.h"
#include "tools/torch_scripts.h"

namespace poseidon::testing {
namespace {

constexpr uint64_t kRunSeed = 11;

class NoUpdate : public GradSink {
 public:
  void grad_ready(Param&) override {}
};

double norm(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += double(t[i]) * t[i];
  return std::sqrt(s);
}

double distance(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s);
}

void expect_float32_close(const std::string& what, const Tensor& ours, const Tensor& exact) {
  ASSERT_EQ(ours.shape(), exact.shape()) << what;
  float largest = 0;
  for (int64_t i = 0; i < exact.numel(); ++i) largest = std::max(largest, std::abs(exact[i]));
  int reported = 0;
  for (int64_t i = 0; i < exact.numel(); ++i)
    if (std::abs(ours[i] - exact[i]) > 1e-4f * largest && ++reported <= 5)
      ADD_FAILURE() << what << "[" << i << "]: ours " << ours[i] << ", torch " << exact[i] << " (largest "
                    << largest << ")";
}

void expect_bf16_close(const std::string& what, const Tensor& ours, const Tensor& exact, const Tensor& autocast) {
  ASSERT_EQ(ours.shape(), exact.shape()) << what;
  const double bound = 2 * distance(autocast, exact) + std::ldexp(1.0, -8) * norm(exact);
  EXPECT_LE(distance(ours, exact), bound)
      << what << ": ours is " << distance(ours, exact) / norm(exact) << " of the norm off float64 PyTorch, autocast "
      << distance(autocast, exact) / norm(exact);
}

TEST(TorchFanOut, GradientsOfABlobFeedingTwoLayersMatchPyTorch) {
  POSEIDON_REQUIRE_TORCH();
  TempDir dir;
  const uint64_t dropout_draw = std::mt19937_64(kRunSeed)();  // the net's only draw in a forward
  ScriptResult script = run_torch_script("fanout_reference.py", "--workdir " + shell_quoted(dir.path().string()) +
                                                                    " --dropout-seed " + std::to_string(dropout_draw));
  ASSERT_EQ(script.status, 0) << script.output;

  int cases = 0;
  for (const char* branch : {"relu", "pool", "dropout"})
    for (const char* precision : {"fp32", "bf16"}) {
      const std::string name = std::string(branch) + "_" + precision;
      SCOPED_TRACE(name);
      const SafetensorsFile ref = read_safetensors(dir.file(name + ".safetensors"));
      auto get = [&](const std::string& key) { return tensor_of(ref.tensors.at(key)); };
      Net net(ConfigNode::parse(ref.metadata.at("model"), name + ".yaml"), 4);
      const bool bf16 = ref.metadata.at("precision") == "bf16";
      if (bf16) net.set_precision(Precision::bf16);
      ASSERT_FALSE(net.blob("c1").shares >= 0) << "c1 feeds two layers: nothing may fuse into it";
      for (Param* p : net.params()) p->value.copy_from(get("param." + p->name));
      net.blob("data").value.copy_from(get("input.data"));
      net.blob("label").value.copy_from(get("input.label"));
      std::mt19937_64 rng(kRunSeed);
      RunContext ctx{Phase::train, &rng, {}};
      NoUpdate sink;
      const float loss = net.forward(ctx);
      // Twice: the second backward finds the first one's gradients in the
      // blobs, which every blob's first writer must overwrite or zero.
      net.backward(ctx, sink);
      net.backward(ctx, sink);

      // Under bf16, c1 (a convolution's output) and its gradient are bfloat16.
      EXPECT_EQ(net.blob("c1").grad.dtype(), bf16 ? DType::bf16 : DType::f32);
      const Tensor c1_grad = net.blob("c1").grad.to(DType::f32);
      std::vector<std::pair<std::string, const Tensor*>> ours = {{"grad.c1", &c1_grad}};
      for (Param* p : net.params()) ours.emplace_back("grad." + p->name, &p->grad);
      for (const auto& [key, tensor] : ours) {
        if (bf16)
          expect_bf16_close(key, *tensor, get("ref." + key), get("autocast." + key));
        else
          expect_float32_close(key, *tensor, get("ref." + key));
      }
      const float exact_loss = ref.tensors.at("ref.loss").data[0];
      EXPECT_NEAR(loss, exact_loss, (bf16 ? std::ldexp(1.0, -7) : 1e-5) * std::abs(exact_loss));
      ++cases;
    }
  EXPECT_EQ(cases, 6);
}

}  // namespace
}  // namespace poseidon::testing
