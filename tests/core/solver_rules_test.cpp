// Adam, AdamW and RMSprop: each rule against a reference computed here in
// double from its definition, blocks of a parameter updated apart equal to
// the whole (the parameter server's sharding), the GPU kernel against the
// CPU loop, the config keys of each rule, and checkpoints of their state
// (PyTorch's names, step counts, exact round trip, mismatches refused).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "core/bf16.h"
#include "core/checkpoint.h"
#include "core/device_memory.h"
#include "core/safetensors.h"
#include "core/solver.h"

namespace poseidon::testing {
namespace {

SolverConfig parse(const std::string& yaml) { return SolverConfig::parse(ConfigNode::parse(yaml, "solver.yaml")); }

Param make_param(const std::string& name, int64_t n, uint32_t seed) {
  Param p;
  p.name = name;
  p.shape = {n};
  p.value = Tensor(p.shape);
  p.grad = Tensor(p.shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) p.value[i] = uni(rng), p.grad[i] = uni(rng);
  return p;
}

TEST(Adam, MatchesItsDefinitionWithBiasCorrection) {
  Solver s(parse("{type: adam, lr: 0.1, betas: [0.8, 0.9], eps: 1e-3, weight_decay: 0.1}"));
  Param p = make_param("w", 3, 1);
  p.lr_mult = 0.5f;
  p.decay_mult = 2.f;
  double w[3], m[3] = {}, v[3] = {};
  for (int i = 0; i < 3; ++i) w[i] = p.value[i];
  for (int t = 1; t <= 4; ++t) {
    s.update(p);
    for (int i = 0; i < 3; ++i) {
      const double g = p.grad[i] + 0.2 * w[i];
      m[i] = 0.8 * m[i] + 0.2 * g;
      v[i] = 0.9 * v[i] + 0.1 * g * g;
      w[i] -= 0.05 / (1 - std::pow(0.8, t)) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(0.9, t)) + 1e-3);
      EXPECT_NEAR(p.value[i], w[i], 1e-6) << "step " << t << " element " << i;
    }
  }
  EXPECT_EQ(s.steps().at("w"), 4);
  EXPECT_EQ(s.state().at("w").shape(), (Shape{2, 3}));
}

TEST(AdamW, DecaysTheWeightsApartFromTheGradient) {
  Solver s(parse("{type: adamw, lr: 0.1, weight_decay: 0.5}"));
  Param p = make_param("w", 3, 2);
  double w[3], m[3] = {}, v[3] = {};
  for (int i = 0; i < 3; ++i) w[i] = p.value[i];
  for (int t = 1; t <= 3; ++t) {
    s.update(p);
    for (int i = 0; i < 3; ++i) {
      const double g = p.grad[i];
      w[i] *= 1 - 0.1 * 0.5;
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      w[i] -= 0.1 / (1 - std::pow(0.9, t)) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(0.999, t)) + 1e-8);
      EXPECT_NEAR(p.value[i], w[i], 1e-6) << "step " << t << " element " << i;
    }
  }
}

TEST(AdamW, DefaultsToPyTorchsWeightDecay) {
  EXPECT_DOUBLE_EQ(parse("{type: adamw, lr: 0.1}").weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(parse("{type: adam, lr: 0.1}").weight_decay, 0.0);
}

TEST(RmsProp, CentredWithMomentumMatchesItsDefinition) {
  Solver s(parse("{type: rmsprop, lr: 0.01, alpha: 0.9, eps: 1e-4, momentum: 0.5, centered: true}"));
  EXPECT_EQ(s.state_names(), (std::vector<std::string>{"square_avg", "momentum_buffer", "grad_avg"}));
  Param p = make_param("w", 3, 3);
  double w[3], sq[3] = {}, buf[3] = {}, avg[3] = {};
  for (int i = 0; i < 3; ++i) w[i] = p.value[i];
  for (int t = 1; t <= 3; ++t) {
    s.update(p);
    for (int i = 0; i < 3; ++i) {
      const double g = p.grad[i];
      sq[i] = 0.9 * sq[i] + 0.1 * g * g;
      avg[i] = 0.9 * avg[i] + 0.1 * g;
      buf[i] = 0.5 * buf[i] + g / (std::sqrt(sq[i] - avg[i] * avg[i]) + 1e-4);
      w[i] -= 0.01 * buf[i];
      EXPECT_NEAR(p.value[i], w[i], 1e-6) << "step " << t << " element " << i;
    }
  }
}

// A parameter server updates each block with that block's slice of every
// state slot and the parameter's step: the result must be the whole update.
TEST(SolverBlocks, BlocksUpdatedApartEqualTheWhole) {
  for (const char* yaml :
       {"{type: adam, lr: 0.1, weight_decay: 0.01}", "{type: adamw, lr: 0.1}",
        "{type: rmsprop, lr: 0.1, momentum: 0.9, centered: true}", "{type: sgd, lr: 0.1, momentum: 0.9}"}) {
    SCOPED_TRACE(yaml);
    Solver s(parse(yaml));
    Param whole = make_param("w", 10, 4);
    Param halves = make_param("w", 10, 4);
    const size_t slots = s.state_names().size();
    std::vector<float> first(slots * 6), second(slots * 4);
    for (int64_t step = 1; step <= 3; ++step) {
      s.update(whole);
      s.update_block(halves.value.data(), halves.grad.data(), first.data(), 6, 1.f, 1.f, step);
      s.update_block(halves.value.data() + 6, halves.grad.data() + 6, second.data(), 4, 1.f, 1.f, step);
    }
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(halves.value[i], whole.value[i]) << i;
    const Tensor& state = s.state().at("w");
    for (size_t slot = 0; slot < slots; ++slot)
      for (int64_t i = 0; i < 10; ++i)
        EXPECT_EQ(state[slot * 10 + i], i < 6 ? first[slot * 6 + i] : second[slot * 4 + i - 6])
            << s.state_names()[slot] << "[" << i << "]";
  }
}

TEST(SolverConfig, RuleKeysBelongToTheirRules) {
  EXPECT_NO_THROW(parse("{type: adam, lr: 0.1, betas: [0.5, 0.6], eps: 0}"));
  EXPECT_NO_THROW(parse("{type: rmsprop, lr: 0.1, alpha: 0.5, momentum: 0.9, centered: true, eps: 1e-3}"));
  for (const char* bad : {"{type: adam, lr: 0.1, momentum: 0.9}", "{type: sgd, lr: 0.1, betas: [0.9, 0.99]}",
                          "{type: rmsprop, lr: 0.1, nesterov: true}", "{type: sgd, lr: 0.1, alpha: 0.9}"}) {
    try {
      parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("applies to"), std::string::npos) << e.what();
    }
  }
  for (const char* bad :
       {"{type: adam, lr: 0.1, betas: [0.9]}", "{type: adam, lr: 0.1, betas: [0.9, 1.0]}",
        "{type: adam, lr: 0.1, eps: -1}", "{type: rmsprop, lr: 0.1, alpha: 1}", "{type: lamb, lr: 0.1}"})
    EXPECT_THROW(parse(bad), ConfigError) << bad;
}

TEST(CudaSolverRules, KernelMatchesTheCpuLoop) {
  if (device_memory::cuda_device_count() == 0) GTEST_SKIP() << device_memory::cuda_unavailable_reason();
  for (const char* yaml : {"{type: adam, lr: 0.1, weight_decay: 0.01}", "{type: adamw, lr: 0.1}",
                           "{type: rmsprop, lr: 0.01, momentum: 0.9, centered: true}", "{type: rmsprop, lr: 0.01}"}) {
    SCOPED_TRACE(yaml);
    Solver solver(parse(yaml));
    Param cpu = make_param("w", 1001, 5);
    Param gpu;
    gpu.name = "w_gpu";
    gpu.shape = cpu.shape;
    gpu.value = cpu.value.to(Device::cuda(0));
    gpu.grad = cpu.grad.to(Device::cuda(0));
    for (int step = 0; step < 3; ++step) {
      solver.update(cpu);
      solver.update(gpu);
    }
    const Tensor back = gpu.value.to(Device{});
    // Each product and sum rounded on both (CMakeLists.txt): the same bits.
    for (int64_t i = 0; i < cpu.value.numel(); ++i) EXPECT_EQ(float_bits(back[i]), float_bits(cpu.value[i])) << i;
    const Tensor state = solver.state().at("w_gpu").to(Device{});
    const Tensor& expected = solver.state().at("w");
    for (int64_t i = 0; i < expected.numel(); ++i)
      EXPECT_EQ(float_bits(state[i]), float_bits(expected[i])) << "state " << i;
  }
}

class SolverCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "solver_rules.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Net> make_net() {
    auto net = std::make_unique<Net>(ConfigNode::parse("name: tiny\ninputs: {data: [4], label: []}\nlayers:\n"
                                                       "  - {name: fc1, type: fc, num_output: 3}\n"
                                                       "  - {name: loss, type: softmax_loss, inputs: [fc1, label]}\n",
                                                       "tiny.yaml"),
                                     2);
    net->init_params(3);
    return net;
  }
  // Two steps on made-up gradients, so that the state is not the initial one.
  static void train(Net& net, Solver& solver) {
    for (int step = 0; step < 2; ++step)
      for (Param* p : net.params()) {
        for (int64_t i = 0; i < p->grad.numel(); ++i) p->grad[i] = 0.1f * static_cast<float>(i % 7) - 0.2f * step;
        solver.update(*p);
      }
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(SolverCheckpoint, AdamStateRoundTripsUnderPyTorchsNames) {
  auto net = make_net();
  Solver solver(parse("{type: adam, lr: 0.1}"));
  train(*net, solver);
  const std::string path = file("adam.safetensors");
  save_checkpoint(path, *net, &solver, {});

  const SafetensorsFile f = read_safetensors(path);
  for (const char* param : {"fc1.weight", "fc1.bias"}) {
    const Shape shape = net->find_param(param)->shape;
    EXPECT_EQ(f.tensors.at(std::string("optimizer.") + param + ".exp_avg").shape, shape);
    EXPECT_EQ(f.tensors.at(std::string("optimizer.") + param + ".exp_avg_sq").shape, shape);
    EXPECT_EQ(f.tensors.at(std::string("optimizer.") + param + ".step").shape, Shape{});
    EXPECT_EQ(f.tensors.at(std::string("optimizer.") + param + ".step").data, std::vector<float>{2.f});
  }
  const Tensor& packed = solver.state().at("fc1.weight");
  const auto& exp_avg_sq = f.tensors.at("optimizer.fc1.weight.exp_avg_sq").data;
  EXPECT_EQ(exp_avg_sq, std::vector<float>(packed.data() + 12, packed.data() + 24));

  auto loaded = make_net();
  Solver restored(parse("{type: adam, lr: 0.1}"));
  load_checkpoint(path, *loaded, &restored);
  EXPECT_EQ(restored.steps(), solver.steps());
  train(*net, solver);
  train(*loaded, restored);
  for (Param* p : net->params()) {
    const Tensor& q = loaded->find_param(p->name)->value;
    EXPECT_EQ(std::vector<float>(p->value.data(), p->value.data() + p->value.numel()),
              std::vector<float>(q.data(), q.data() + q.numel()))
        << p->name;
  }
}

TEST_F(SolverCheckpoint, StateOfAnotherRuleOrIncompleteStateIsRefused) {
  auto net = make_net();
  Solver sgd(parse("{type: sgd, lr: 0.1, momentum: 0.9}"));
  train(*net, sgd);
  const std::string sgd_path = file("sgd.safetensors");
  save_checkpoint(sgd_path, *net, &sgd, {});
  Solver adam(parse("{type: adam, lr: 0.1}"));
  auto error_of = [&](const std::string& path) {
    try {
      load_checkpoint(path, *make_net(), &adam);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string msg = error_of(sgd_path);
  EXPECT_NE(msg.find("momentum_buffer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("adam"), std::string::npos) << msg;

  train(*net, adam);
  const std::string adam_path = file("adam.safetensors");
  save_checkpoint(adam_path, *net, &adam, {});
  SafetensorsFile f = read_safetensors(adam_path);
  auto write_without = [&](const std::string& dropped, const std::string& path, float step) {
    std::vector<Tensor> keep;
    std::vector<std::pair<std::string, const Tensor*>> entries;
    keep.reserve(f.tensors.size());
    for (const auto& [name, t] : f.tensors) {
      if (name == dropped) continue;
      keep.emplace_back(t.shape);
      std::copy(t.data.begin(), t.data.end(), keep.back().data());
      if (name.ends_with(".step")) keep.back()[0] = step;
      entries.emplace_back(name, &keep.back());
    }
    write_safetensors(path, entries, {});
    return path;
  };
  msg = error_of(write_without("optimizer.fc1.bias.step", file("no_step.safetensors"), 2.f));
  EXPECT_NE(msg.find("optimizer.fc1.bias.step' is missing"), std::string::npos) << msg;
  msg = error_of(write_without("optimizer.fc1.weight.exp_avg", file("no_avg.safetensors"), 2.f));
  EXPECT_NE(msg.find("optimizer.fc1.weight.exp_avg' is missing"), std::string::npos) << msg;
  msg = error_of(write_without("", file("half_step.safetensors"), 1.5f));
  EXPECT_NE(msg.find("whole number"), std::string::npos) << msg;
  EXPECT_TRUE(adam.state().size() == 2 && adam.steps().size() == 2);
}

}  // namespace
}  // namespace poseidon::testing
