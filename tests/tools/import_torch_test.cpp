// `poseidon import-torch`: torchvision's VGG-19, ResNet-50 and Inception-V3
// (random weights, batch norm with random running statistics, eval mode)
// and a small model of other mappings become a model YAML and a safetensors
// file; the engine's forward on them must give PyTorch's output
// (tests/torch/import_torch_reference.py, float64 from the same float32
// weights) within 1e-5 relative. Models with what no
// layer computes (an LSTM, reflection padding) are refused in one line naming
// the module's path, and nothing is written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <random>

#include "core/checkpoint.h"
#include "core/safetensors.h"
#include "tools/cli/train_config.h"
#include "tools/cli_runner.h"
#include "tools/torch_scripts.h"

namespace poseidon::testing {
namespace {

const std::string kRoot = POSEIDON_SOURCE_DIR;
const std::string kModels = kRoot + "/tests/torch/import_models.py";

// Fails (or, with POSEIDON_SKIP_TORCH=1, skips) unless torchvision (and so torch) imports.
#define REQUIRE_TORCHVISION()                                                                           \
  do {                                                                                                  \
    const ScriptResult probe = run_torch_script("torchvision_forward.py", "--help");                    \
    if (probe.status != 0) {                                                                            \
      if (torch_skip_requested()) GTEST_SKIP() << "torchvision does not import:\n" << probe.output;     \
      FAIL() << "install python3-torchvision, or set POSEIDON_SKIP_TORCH=1 to skip:\n" << probe.output; \
    }                                                                                                   \
  } while (0)

struct RoundTrip {
  const char* model;
  int size, batch;
  const char* output;  // the blob holding the model's output: its module's path
  const char* note;    // what the importer must say it left out; empty: nothing
};

void PrintTo(const RoundTrip& c, std::ostream* os) { *os << c.model; }

class ImportTorchRoundTrip : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(ImportTorchRoundTrip, ForwardMatchesPyTorch) {
  REQUIRE_TORCHVISION();
  const RoundTrip c = GetParam();
  TempDir dir;
  const std::string size = std::to_string(c.size);
  ScriptResult reference = run_torch_script("import_torch_reference.py",
                                            std::string("--model ") + c.model + " --size " + size + " --batch " +
                                                std::to_string(c.batch) + " --workdir " + shell_quoted(dir.path()));
  ASSERT_EQ(reference.status, 0) << reference.output;
  CliResult imported =
      run_poseidon("import-torch " + shell_quoted(kModels + ":" + c.model) + " --input 3," + size + "," + size +
                   " -o " + dir.file("model.yaml") + " --weights " + dir.file("weights.safetensors"));
  ASSERT_EQ(imported.status, 0) << imported.out << imported.err;
  EXPECT_EQ(imported.out.find("note:") != std::string::npos, *c.note != 0) << imported.out;
  EXPECT_NE(imported.out.find(c.note), std::string::npos) << imported.out;

  const SafetensorsTensor input = read_safetensors(dir.file("input.safetensors")).tensors.at("data");
  Net net(load_model(dir.file("model.yaml"), {}), c.batch);
  ASSERT_EQ(net.blob("data").value.shape(), input.shape);
  load_checkpoint(dir.file("weights.safetensors"), net, nullptr);
  std::copy(input.data.begin(), input.data.end(), net.blob("data").value.data());
  if (net.has_blob("label")) net.blob("label").value.zero();
  std::mt19937_64 rng(1);
  RunContext ctx{Phase::test, &rng, {}};
  net.forward(ctx);

  const SafetensorsTensor ref = read_safetensors(dir.file("reference.safetensors")).tensors.at("output");
  const Tensor& ours = net.blob(c.output).value;
  ASSERT_EQ(ours.shape(), ref.shape);
  const double error = relative_error(ours, ref);
  EXPECT_LE(error, 1e-5) << c.model;
  std::printf("%s %dx%d batch %d: output %s, relative error %.2e\n", c.model, c.size, c.size, c.batch,
              shape_str(ours.shape()).c_str(), error);
}

// The smallest inputs each model takes: VGG-19 and ResNet-50 halve 32x32 five
// times; Inception-V3 needs 75x75 (its auxiliary head, left out in eval
// mode, would need 299x299). mixed_layers holds the mappings those three do
// not use (subtraction, products, 'same' padding, PReLU, ceil_mode, view).
INSTANTIATE_TEST_SUITE_P(
    Torchvision, ImportTorchRoundTrip,
    ::testing::Values(RoundTrip{"vgg19", 32, 1, "classifier.6", ""}, RoundTrip{"resnet50", 32, 2, "fc", ""},
                      RoundTrip{"inception_v3", 75, 2, "fc", "note: AuxLogits is not called by forward in eval mode"},
                      RoundTrip{"mixed_layers", 10, 2, "softmax", ""}),
    [](const auto& info) { return std::string(info.param.model); });

struct Refusal {
  const char* model;
  const char* input;
  const char* message;  // the error line starts with this
};

void PrintTo(const Refusal& c, std::ostream* os) { *os << c.model; }

class ImportTorchRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(ImportTorchRefuses, NamesTheModuleInOneLine) {
  POSEIDON_REQUIRE_TORCH();
  const Refusal c = GetParam();
  TempDir dir;
  CliResult r = run_poseidon("import-torch " + shell_quoted(kModels + ":" + c.model) + " --input " + c.input + " -o " +
                             dir.file("model.yaml") + " --weights " + dir.file("weights.safetensors"));
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind(c.message, 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("model.yaml")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("weights.safetensors")));
}

INSTANTIATE_TEST_SUITE_P(
    Models, ImportTorchRefuses,
    ::testing::Values(Refusal{"Tagger", "5,8", "error: rnn: torch.nn.modules.rnn.LSTM has no poseidon layer type"},
                      Refusal{"ReflectPadded", "3,8,8",
                              "error: features.2: padding_mode 'reflect'; poseidon's conv pads with zeros only"}),
    [](const auto& info) { return std::string(info.param.model); });

// Without PyTorch (python3 -S leaves out Debian's dist-packages) the importer
// says what to install, in one line, with the config-error status.
TEST(ImportTorch, SaysWhenPyTorchIsMissing) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string command = "/usr/bin/python3 -S " + shell_quoted(kRoot + "/tools/import_torch.py") +
                              " torchvision.models:vgg19 --input 3,32,32 -o m.yaml --weights w.safetensors 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int raw = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 2);
  EXPECT_EQ(output.rfind("error: poseidon import-torch needs PyTorch (Debian: python3-torch): ", 0), 0u) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
}

// The CLI hands every argument to the script, --help included; arguments are
// checked before PyTorch is imported.
TEST(ImportTorch, HelpAndBadArgumentsThroughTheCli) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  CliResult help = run_poseidon("import-torch --help");
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_EQ(help.out.rfind("usage: poseidon import-torch ", 0), 0u) << help.out;
  EXPECT_NE(help.out.find("--state-dict"), std::string::npos) << help.out;

  TempDir dir;
  CliResult bad = run_poseidon("import-torch torchvision.models:vgg19 --input 3,x -o " + dir.file("m.yaml") +
                               " --weights " + dir.file("w.safetensors"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_EQ(bad.err, "error: --input 3,x: expected positive integers separated by commas, e.g. 3,224,224\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.yaml")));
}

}  // namespace
}  // namespace poseidon::testing
