// Numerics against torch.optim: tests/torch/optim_reference.py runs SGD,
// Adam, AdamW and RMSprop for 5 steps on fixed gradients in float64; the
// Solver, fed the same values and gradients, must end with the same
// parameters (to 1e-5 of max(|torch|, 1)) and the same state (to 1e-5 of the
// tensor's largest element), under the same names, step counts included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/safetensors.h"
#include "core/solver.h"
#include "tools/cli_runner.h"
#include "tools/torch_scripts.h"

namespace poseidon::testing {
namespace {

constexpr double kTolerance = 1e-5;

// The Solver's state of `param` under PyTorch's names, as a checkpoint holds it.
std::map<std::string, std::vector<float>> state_by_name(const Solver& solver, const std::string& param) {
  std::map<std::string, std::vector<float>> out;
  if (solver.keeps_state()) {
    const Tensor& packed = solver.state().at(param);
    const int64_t n = packed.numel() / static_cast<int64_t>(solver.state_names().size());
    for (size_t i = 0; i < solver.state_names().size(); ++i)
      out["optimizer." + param + "." + solver.state_names()[i]].assign(packed.data() + i * n,
                                                                       packed.data() + (i + 1) * n);
  }
  if (solver.counts_steps()) out["optimizer." + param + ".step"] = {static_cast<float>(solver.steps().at(param))};
  return out;
}

TEST(TorchOptim, FiveStepsMatchTorchOptim) {
  POSEIDON_REQUIRE_TORCH();
  TempDir dir;
  ScriptResult script = run_torch_script("optim_reference.py", "--workdir " + shell_quoted(dir.path().string()));
  ASSERT_EQ(script.status, 0) << script.output;

  std::set<std::string> types;
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    ++cases;
    const SafetensorsFile ref = read_safetensors(entry.path().string());
    const SolverConfig config = SolverConfig::parse(ConfigNode::parse(ref.metadata.at("solver"), name));
    types.insert(config.type);
    Solver solver(config);
    std::vector<Param> params;
    for (const char* p : {"weight", "bias"}) {
      Param param;
      param.name = p;
      param.value = tensor_of(ref.tensors.at(std::string("init.") + p));
      param.shape = param.value.shape();
      param.grad = Tensor(param.shape);
      param.lr_mult = std::stof(ref.metadata.at(std::string(p) + ".lr_mult"));
      param.decay_mult = std::stof(ref.metadata.at(std::string(p) + ".decay_mult"));
      params.push_back(param);
    }
    const int steps = std::stoi(ref.metadata.at("steps"));
    for (int step = 0; step < steps; ++step) {
      solver.set_iteration(step);
      for (Param& p : params) {
        const auto& g = ref.tensors.at("grad." + std::to_string(step) + "." + p.name).data;
        std::copy(g.begin(), g.end(), p.grad.data());
        solver.update(p);
      }
    }
    for (const Param& p : params) {
      const auto& expected = ref.tensors.at("final." + p.name).data;
      for (int64_t i = 0; i < p.value.numel(); ++i)
        EXPECT_NEAR(p.value[i], expected[i], kTolerance * std::max(1.0f, std::abs(expected[i])))
            << p.name << "[" << i << "]";
      // The same state tensors as torch.optim keeps, under its names.
      std::set<std::string> torch_names, ours;
      for (const auto& [key, t] : ref.tensors)
        if (key.starts_with("optimizer." + p.name + ".")) torch_names.insert(key);
      const auto state = state_by_name(solver, p.name);
      for (const auto& [key, v] : state) ours.insert(key);
      EXPECT_EQ(ours, torch_names) << p.name;
      for (const auto& [key, values] : state) {
        if (!ref.tensors.count(key)) continue;
        const auto& theirs = ref.tensors.at(key).data;
        ASSERT_EQ(values.size(), theirs.size()) << key;
        float largest = 0;
        for (float v : theirs) largest = std::max(largest, std::abs(v));
        for (size_t i = 0; i < values.size(); ++i)
          EXPECT_NEAR(values[i], theirs[i], kTolerance * largest) << key << "[" << i << "]";
      }
    }
  }
  EXPECT_EQ(cases, 7) << script.output;
  EXPECT_EQ(types, (std::set<std::string>{"sgd", "adam", "adamw", "rmsprop"}));
}

}  // namespace
}  // namespace poseidon::testing
