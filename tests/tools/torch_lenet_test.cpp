// Numerics against PyTorch: `poseidon train` on LeNet must reproduce five
// PyTorch SGD steps, and five Adam steps (tests/torch/lenet_reference.py),
// in bf16 five SGD steps of PyTorch's bfloat16 autocast,
// and safetensors files written by PyTorch must read back exactly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/safetensors.h"

namespace poseidon::testing {
namespace {

namespace fs = std::filesystem;

const char* const kPython = "/usr/bin/python3";

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CommandResult {
  int status = -1;  // exit status, -1 if it did not exit normally
  std::string output;
};

CommandResult run_command(const std::string& command) {
  CommandResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  int raw = ::pclose(pipe);
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  return r;
}

class TorchReference : public ::testing::Test {
 protected:
  void SetUp() override {
    CommandResult probe = run_command(std::string(kPython) + " -c 'import torch'");
    if (probe.status != 0) {
      const char* skip = std::getenv("POSEIDON_SKIP_TORCH");
      if (skip && std::string(skip) == "1")
        GTEST_SKIP() << "PyTorch is not importable by " << kPython << " and POSEIDON_SKIP_TORCH=1";
      FAIL() << kPython << " cannot import torch; install python3-torch (tools/test.sh installs it), "
             << "or set POSEIDON_SKIP_TORCH=1 to skip:\n"
             << probe.output;
    }
    std::string pattern = (fs::temp_directory_path() / "torch_reference.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  // Runs tests/torch/lenet_reference.py with `options` after its usual arguments.
  void expect_lenet_reference_passes(const std::string& options) {
    std::string command = std::string(kPython) + " " +
                          shell_quoted(std::string(POSEIDON_SOURCE_DIR) + "/tests/torch/lenet_reference.py") +
                          " --poseidon " + shell_quoted(POSEIDON_BINARY) + " --repo " +
                          shell_quoted(POSEIDON_SOURCE_DIR) + " --workdir " + shell_quoted(dir_.string()) + options;
    CommandResult r = run_command(command);
    EXPECT_EQ(r.status, 0) << command << "\n" << r.output << "(work files kept in " << dir_.string() << ")";
  }

  fs::path dir_;
};

TEST_F(TorchReference, LenetTrainingMatchesPyTorch) { expect_lenet_reference_passes(""); }

TEST_F(TorchReference, LenetAdamTrainingMatchesPyTorch) { expect_lenet_reference_passes(" --solver adam"); }

TEST_F(TorchReference, LenetBf16TrainingMatchesPyTorchAutocast) {
  expect_lenet_reference_passes(" --precision bf16");
}

TEST_F(TorchReference, ReadsFilesWrittenByPyTorch) {
  std::string path = (dir_ / "from_torch.safetensors").string();
  // Values exact in every dtype, F16 and BF16 included.
  std::string script =
      "import sys; sys.path.insert(0, sys.argv[1] + '/tests/torch')\n"
      "import torch, safetensors_io\n"
      "v = torch.tensor([1.5, -2.25, 3.0, 0.125])\n"
      "safetensors_io.write(sys.argv[2], {'f32': v.float(), 'f64': v.double(), 'f16': v.half(),\n"
      "    'bf16': v.bfloat16(), 'i64': torch.tensor([-3, 1 << 40]),\n"
      "    'i32': torch.tensor([5, -9], dtype=torch.int32), 'matrix': torch.arange(6.).reshape(2, 3)},\n"
      "    {'origin': 'torch'})\n";
  CommandResult r = run_command(std::string(kPython) + " -c " + shell_quoted(script) + " " +
                                shell_quoted(POSEIDON_SOURCE_DIR) + " " + shell_quoted(path));
  ASSERT_EQ(r.status, 0) << r.output;

  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata.at("origin"), "torch");
  const std::vector<float> v = {1.5f, -2.25f, 3.0f, 0.125f};
  for (const char* name : {"f32", "f64", "f16", "bf16"}) {
    EXPECT_EQ(f.tensors.at(name).shape, (Shape{4})) << name;
    EXPECT_EQ(f.tensors.at(name).data, v) << name;
  }
  EXPECT_EQ(f.tensors.at("i64").data, (std::vector<float>{-3.f, 1099511627776.f}));
  EXPECT_EQ(f.tensors.at("i32").data, (std::vector<float>{5.f, -9.f}));
  EXPECT_EQ(f.tensors.at("matrix").shape, (Shape{2, 3}));
  EXPECT_EQ(f.tensors.at("matrix").data, (std::vector<float>{0.f, 1.f, 2.f, 3.f, 4.f, 5.f}));
}

}  // namespace
}  // namespace poseidon::testing
