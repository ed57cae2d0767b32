// Numerics against torchvision. Forward: torchvision's randomly initialised
// vgg19, inception_v3 (299x299, auxiliary head) and resnet50, exported by
// tests/torch/torchvision_forward.py, are loaded into our models and run in
// eval mode on the same input; every output the script recorded must match
// to relative 1e-4. Training: tests/torch/train_step_reference.py runs
// `poseidon train` on reduced Inception-V3 and VGG19-22K and compares the
// losses, parameters, running statistics and momentum with PyTorch's.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/checkpoint.h"
#include "core/safetensors.h"
#include "tools/cli/train_config.h"
#include "tools/torch_scripts.h"

namespace poseidon::testing {
namespace {

namespace fs = std::filesystem;

const char* const kPython = "/usr/bin/python3";
const std::string kRoot = POSEIDON_SOURCE_DIR;
constexpr double kTolerance = 1e-4;

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int status = -1;
  std::string output;
};

CommandResult run(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  int raw = ::pclose(pipe);
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  return r;
}

class Torchvision : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    CommandResult probe = run(std::string(kPython) + " -c 'import torch, torchvision'");
    if (probe.status != 0) {
      const char* skip = std::getenv("POSEIDON_SKIP_TORCH");
      if (skip && std::string(skip) == "1")
        GTEST_SKIP() << "torchvision is not importable by " << kPython << " and POSEIDON_SKIP_TORCH=1";
      FAIL() << kPython << " cannot import torch and torchvision; install python3-torchvision, "
             << "or set POSEIDON_SKIP_TORCH=1 to skip:\n"
             << probe.output;
    }
    std::string pattern = (fs::temp_directory_path() / "torchvision.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  fs::path dir_;
};

using TorchvisionForward = Torchvision;

TEST_P(TorchvisionForward, EvalOutputsMatch) {
  const std::string model = GetParam();
  std::string command = std::string(kPython) + " " + quoted(kRoot + "/tests/torch/torchvision_forward.py") +
                        " --model " + model + " --workdir " + quoted(dir_.string());
  CommandResult script = run(command);
  ASSERT_EQ(script.status, 0) << command << "\n" << script.output;

  const SafetensorsTensor input = read_safetensors((dir_ / "input.safetensors").string()).tensors.at("data");
  Net net(load_model(kRoot + "/models/" + model + ".yaml", {}), input.shape[0]);
  ASSERT_EQ(net.blob("data").value.shape(), input.shape);
  load_checkpoint((dir_ / "weights.safetensors").string(), net, nullptr);
  std::copy(input.data.begin(), input.data.end(), net.blob("data").value.data());
  net.blob("label").value.zero();
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::test, &rng, {}};
  net.forward(ctx);

  const SafetensorsFile reference = read_safetensors((dir_ / "reference.safetensors").string());
  ASSERT_FALSE(reference.tensors.empty());
  for (const auto& [blob, ref] : reference.tensors) {
    ASSERT_TRUE(net.has_blob(blob)) << model << " has no blob '" << blob << "'";
    const Tensor& ours = net.blob(blob).value;
    ASSERT_EQ(shape_numel(ours.shape()), static_cast<int64_t>(ref.data.size())) << blob;
    const double error = relative_error(ours, ref);
    EXPECT_LE(error, kTolerance) << model << " blob " << blob;
    std::printf("%-14s %-22s %-20s relative error %.2e\n", model.c_str(), blob.c_str(), shape_str(ours.shape()).c_str(),
                error);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionForward, ::testing::Values("vgg19", "inception_v3", "resnet50"),
                         [](const auto& info) { return info.param; });

using TorchvisionTraining = Torchvision;

TEST_P(TorchvisionTraining, StepsMatchPyTorch) {
  std::string command = std::string(kPython) + " " + quoted(kRoot + "/tests/torch/train_step_reference.py") +
                        " --case " + GetParam() + " --poseidon " + quoted(POSEIDON_BINARY) + " --repo " +
                        quoted(kRoot) + " --workdir " + quoted(dir_.string());
  CommandResult r = run(command);
  EXPECT_EQ(r.status, 0) << command << "\n" << r.output << "(work files kept in " << dir_.string() << ")";
  std::printf("%s", r.output.substr(r.output.find("iter    poseidon")).c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, TorchvisionTraining, ::testing::Values("vgg19_22k_32", "inception_v3_aux"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace poseidon::testing
