// The layers that move or select values (ReLU, max and average pooling,
// dropout, flatten, concat, sum) on bfloat16 blobs on the CPU: the values
// they write, forward and backward, are their float32 results on the same
// (bfloat16-exact) operands rounded once, bit for bit. A layer that rounded
// between steps (a window's shares, the inputs of a sum, an input gradient
// before the old one joins it) or read the 16 bits wrongly differs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bf16_check.h"
#include "core/bf16.h"
#include "core/blob_types.h"
#include "core/registry.h"

namespace poseidon::testing {
namespace {

// A copy of `t` holding `type` (never `t`'s own storage: the runs add into
// their input gradients).
Tensor copy_as(const Tensor& t, DType type) {
  Tensor c(t.shape(), Device{}, type);
  c.copy_from(t);
  return c;
}

struct Run {
  std::vector<Tensor> x, y, dy, dx;
};

// Forward and backward of `yaml` on `x` (and `dy`, `dx` to add into), in the
// tensors' type `type`; dropout draws its mask from the same seed in both.
Run run(const std::string& yaml, const std::vector<Tensor>& x, const std::vector<Tensor>& dy_in,
        const std::vector<Tensor>& dx_in, DType type) {
  auto layer = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"));
  std::vector<Shape> shapes;
  for (const Tensor& t : x) shapes.push_back(t.shape());
  const std::vector<Shape> out = layer->reshape(shapes);
  Run r;
  for (size_t k = 0; k < x.size(); ++k) {
    r.x.push_back(copy_as(x[k], type));
    r.dx.push_back(copy_as(dx_in[k], type));
  }
  for (size_t k = 0; k < out.size(); ++k) {
    r.y.emplace_back(out[k], Device{}, type);
    r.dy.push_back(copy_as(dy_in[k].reshaped(out[k]), type));
  }
  LayerIO io;
  for (size_t k = 0; k < x.size(); ++k) {
    io.in.push_back(&r.x[k]);
    io.in_grad.push_back(&r.dx[k]);
  }
  for (size_t k = 0; k < out.size(); ++k) {
    io.out.push_back(&r.y[k]);
    io.out_grad.push_back(&r.dy[k]);
  }
  std::mt19937_64 rng(5);
  RunContext ctx{Phase::train, &rng, {}};
  layer->forward(io, ctx);
  layer->backward(io, ctx);
  return r;
}

void expect_rounded(const std::vector<Tensor>& f32, const std::vector<Tensor>& bf16, const std::string& what) {
  ASSERT_EQ(f32.size(), bf16.size());
  for (size_t k = 0; k < f32.size(); ++k) {
    ASSERT_EQ(bf16[k].dtype(), DType::bf16) << what << " " << k;
    const uint16_t* got = bf16[k].bf16_data();
    int64_t wrong = 0, first = -1;
    for (int64_t i = 0; i < f32[k].numel(); ++i)
      if (got[i] != to_bf16(f32[k][i]) && wrong++ == 0) first = i;
    EXPECT_EQ(wrong, 0) << what << " " << k << ": " << wrong << " of " << f32[k].numel() << " differ, first at "
                        << first;
  }
}

void expect_bf16_is_f32_rounded(const std::string& yaml, const std::vector<Shape>& in) {
  SCOPED_TRACE(yaml);
  std::mt19937_64 rng(17);
  std::vector<Tensor> x, dx;
  for (const Shape& s : in) x.push_back(bf16_exact(s, rng)), dx.push_back(bf16_exact(s, rng));
  // The output gradient has the output's element count; a probe run finds it.
  auto probe = LayerRegistry::instance().create(ConfigNode::parse(yaml, "t.yaml"));
  const Shape out = probe->reshape(in)[0];
  std::vector<Tensor> dy = {bf16_exact({shape_numel(out)}, rng)};
  const Run f32 = run(yaml, x, dy, dx, DType::f32);
  const Run bf16 = run(yaml, x, dy, dx, DType::bf16);
  expect_rounded(f32.y, bf16.y, "output");
  expect_rounded(f32.dx, bf16.dx, "input gradient");
}

TEST(Bf16BlobLayers, ReluIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: r, type: relu}", {{2, 3, 37, 41}});
}

TEST(Bf16BlobLayers, MaxPoolWithOverlappingWindowsIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: p, type: pool, kernel_size: 3, stride: 2, pad: 1}", {{2, 3, 9, 11}});
}

TEST(Bf16BlobLayers, AvgPoolIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: p, type: pool, mode: avg, kernel_size: 3, stride: 2}", {{2, 3, 9, 11}});
  expect_bf16_is_f32_rounded("{name: p, type: pool, mode: avg, global: true}", {{2, 5, 6, 6}});
}

TEST(Bf16BlobLayers, DropoutIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: d, type: dropout, ratio: 0.3}", {{4, 333}});
}

TEST(Bf16BlobLayers, FlattenIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: f, type: flatten}", {{2, 3, 4, 5}});
}

TEST(Bf16BlobLayers, ConcatIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: c, type: concat}", {{2, 3, 4, 5}, {2, 2, 4, 5}, {2, 1, 4, 5}});
}

TEST(Bf16BlobLayers, SumOfThreeIsItsFloat32ResultRounded) {
  expect_bf16_is_f32_rounded("{name: s, type: sum, coefficients: [1, -0.5, 3]}",
                             {{2, 3, 17, 19}, {2, 3, 17, 19}, {2, 3, 17, 19}});
}

}  // namespace
}  // namespace poseidon::testing
