// The weights rounded to bfloat16 by the Solver's update (core/rounded_weight.h):
// every rule writes the copy, as bits or as floats, equal to the rounding of
// the value it has just written, on the CPU loops and in the GPU kernel's
// host walk alike; a bf16 net trained on the update's copies takes the very
// steps of one whose layers round every weight themselves; and a copy made
// stale by a write after the update (a checkpoint loaded, a new fill, a
// weight changed after the forward that read the copy) is never multiplied.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "core/bf16.h"
#include "core/checkpoint.h"
#include "core/local_sink.h"
#include "core/solver.h"
#include "core/update_groups.h"
#include "net_fixtures.h"

namespace poseidon {
namespace {

using namespace testing;  // net_fixtures.h

SolverConfig parse(const std::string& yaml) { return SolverConfig::parse(ConfigNode::parse(yaml, "solver.yaml")); }

const char* const kRules[] = {
    "{type: sgd, lr: 0.1}",
    "{type: sgd, lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 0.01}",
    "{type: adam, lr: 0.01, weight_decay: 0.1}",
    "{type: adamw, lr: 0.01}",
    "{type: rmsprop, lr: 0.01, momentum: 0.5, centered: true}",
};

Param random_param(int64_t n, DType copy) {
  Param p;
  p.name = "w";
  p.shape = {n};
  p.value = Tensor(p.shape);
  p.grad = Tensor(p.shape);
  p.rounded.copy = Tensor(p.shape, Device{}, copy);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) p.value[i] = uni(rng), p.grad[i] = uni(rng);
  return p;
}

// The copy's elements widened to float32, against value's rounded here.
void expect_copy_of_value(const Param& p) {
  const Tensor copy = p.rounded.copy.to(DType::f32);
  for (int64_t i = 0; i < p.value.numel(); ++i)
    ASSERT_EQ(float_bits(copy[i]), float_bits(from_bf16(to_bf16(p.value[i])))) << "element " << i;
}

TEST(RoundedWeights, EveryRuleWritesTheCopyOfItsNewValue) {
  for (const char* rule : kRules)
    for (DType type : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string(rule) + " into " + dtype_name(type));
      Solver solver(parse(rule));
      // Past 65536 elements the loops run in parallel.
      Param p = random_param(70001, type);
      for (int step = 0; step < 2; ++step) {
        solver.update(p);
        EXPECT_TRUE(p.rounded.current);
        expect_copy_of_value(p);
      }
    }
}

TEST(RoundedWeights, TheGroupWalkOfTheGpuKernelWritesTheCopies) {
  Param bits = random_param(1000, DType::bf16), floats = random_param(500, DType::f32);
  UpdateStep step;
  step.lr = 0.1f;
  step.decay = 0.01f;
  std::vector<UpdateSlice> table;
  add_update_slice(table, step, bits.value.data(), bits.grad.data(), nullptr, 1000,
                   {.bits = bits.rounded.copy.bf16_data()});
  add_update_slice(table, step, floats.value.data(), floats.grad.data(), nullptr, 500,
                   {.floats = floats.rounded.copy.data()});
  apply_update_table(table.data(), static_cast<int>(table.size()), nullptr, 7);
  expect_copy_of_value(bits);
  expect_copy_of_value(floats);
}

// conv -> relu -> pool -> fc -> loss, with the float32 engines that read
// the update's copy as rounded floats (im2col, BLAS) or with the engines
// the CPU picks (oneDNN's).
std::string conv_fc_model(bool float32_engines) {
  const std::string conv_engine = float32_engines ? ", engine: im2col" : "";
  const std::string fc_engine = float32_engines ? ", engine: blas" : "";
  return "name: convfc\n"
         "inputs: {data: [3, 8, 8], label: []}\n"
         "layers:\n"
         "  - {name: conv1, type: conv, num_output: 8, kernel_size: 3, pad: 1" +
         conv_engine +
         "}\n"
         "  - {name: relu1, type: relu}\n"
         "  - {name: pool1, type: pool, kernel_size: 2, stride: 2}\n"
         "  - {name: fc, type: fc, num_output: 3" +
         fc_engine +
         "}\n"
         "  - {name: loss, type: softmax_loss, inputs: [fc, label]}\n";
}

std::unique_ptr<Net> bf16_net(bool float32_engines, uint64_t seed = 3) {
  auto net = std::make_unique<Net>(ConfigNode::parse(conv_fc_model(float32_engines), "net.yaml"), 8);
  net->set_precision(Precision::bf16);
  net->init_params(seed);
  return net;
}

float train_step(Net& net, Solver& solver, int64_t iter) {
  feed(net, static_cast<uint64_t>(10 + iter));
  LocalGradSink sink(solver);
  RunContext ctx;
  const float loss = net.forward(ctx);
  net.backward(ctx, sink);
  solver.set_iteration(iter + 1);
  return loss;
}

bool same_bits(Net& a, Net& b) {
  const Tensor &x = a.flat_values(), &y = b.flat_values();
  return x.numel() == y.numel() &&
         std::memcmp(x.data(), y.data(), static_cast<size_t>(x.numel()) * sizeof(float)) == 0;
}

TEST(RoundedWeights, TrainingOnTheUpdatesCopiesTakesTheStepsOfRoundingEachForward) {
  for (bool float32_engines : {true, false}) {
    SCOPED_TRACE(float32_engines ? "float32 engines" : "the CPU's engines");
    auto copies = bf16_net(float32_engines), rounding = bf16_net(float32_engines);
    Solver a(parse(kRules[1])), b(parse(kRules[1]));
    for (int64_t it = 0; it < 4; ++it) {
      const float la = train_step(*copies, a, it);
      const float lb = train_step(*rounding, b, it);
      ASSERT_EQ(float_bits(la), float_bits(lb)) << "iteration " << it;
      if (float32_engines) {
        // The float32 engines read the update's copy; after the update it
        // is current, so the next forward takes it rather than rounding.
        EXPECT_TRUE(copies->find_param("conv1.weight")->rounded.current) << it;
        EXPECT_TRUE(copies->find_param("fc.weight")->rounded.current) << it;
      }
      // The other net's layers round every weight themselves, as before the copies.
      values_written(rounding->params());
      ASSERT_TRUE(same_bits(*copies, *rounding)) << "iteration " << it;
    }
  }
}

// The loss of a forward of `net` against that of a fresh net holding the
// same values, whose layers can only round them themselves.
void expect_forward_of_its_values(Net& net, uint64_t batch_seed) {
  auto fresh = bf16_net(true);
  fresh->flat_values().copy_from(net.flat_values());
  values_written(fresh->params());
  feed(net, batch_seed);
  feed(*fresh, batch_seed);
  RunContext ctx;
  EXPECT_EQ(float_bits(net.forward(ctx)), float_bits(fresh->forward(ctx)));
}

TEST(RoundedWeights, AStaleCopyIsNeverMultiplied) {
  const std::string path = (std::filesystem::temp_directory_path() / "rounded_weight_test.safetensors").string();
  auto other = bf16_net(true, 11);
  save_checkpoint(path, *other, nullptr, {});
  {
    SCOPED_TRACE("a checkpoint loaded after the update");
    auto net = bf16_net(true);
    Solver solver(parse(kRules[0]));
    train_step(*net, solver, 0);
    ASSERT_TRUE(net->find_param("conv1.weight")->rounded.current);
    load_checkpoint(path, *net, nullptr);
    ASSERT_TRUE(same_bits(*net, *other));
    expect_forward_of_its_values(*net, 20);
  }
  {
    SCOPED_TRACE("a new fill after the update");
    auto net = bf16_net(true);
    Solver solver(parse(kRules[0]));
    train_step(*net, solver, 0);
    net->init_params(11);
    expect_forward_of_its_values(*net, 21);
  }
  {
    SCOPED_TRACE("a weight written after the forward that read the update's copy");
    auto net = bf16_net(true);
    Solver solver(parse(kRules[0]));
    train_step(*net, solver, 0);
    feed(*net, 22);
    RunContext ctx;
    net->forward(ctx);
    EXPECT_FALSE(net->find_param("fc.weight")->rounded.current);
    Tensor& w = net->find_param("fc.weight")->value;
    for (int64_t i = 0; i < w.numel(); ++i) w[i] *= -2.f;  // no one is told
    expect_forward_of_its_values(*net, 23);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace poseidon
