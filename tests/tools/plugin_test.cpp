// Plug-ins through the CLI: their types are listed with their library, a
// training config's `plugins:` loads them, check-layer checks them and finds
// a planted overwrite, and each way loading fails exits 2 naming the library
// and the reason.
#include <gtest/gtest.h>

#include <cmath>

#include "core/device_memory.h"
#include "core/plugin.h"
#include "core/safetensors.h"
#include "gpu_required.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

std::string plugin(const std::string& name) { return std::string(POSEIDON_PLUGIN_DIR) + "/libplugin_" + name + ".so"; }

// A small classifier with the swish plug-in as its non-linearity, in d/model.yaml.
void write_swish_model(const TempDir& d) {
  d.write("model.yaml", R"(name: m
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, num_output: 5}
  - {name: act, type: swish}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)");
}

TEST(Plugin, LayersListsItsTypesAndKeysWithTheLibrary) {
  CliResult r = run_poseidon("layers --plugin " + plugin("swish"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("swish: x * sigmoid(beta * x)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[plug-in " + plugin("swish") + "]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("beta_init"), std::string::npos) << r.out;
  CliResult without = run_poseidon("layers");
  EXPECT_EQ(without.out.find("swish"), std::string::npos);
}

TEST(Plugin, TrainingConfigListLoadsItAndItsParameterIsCheckpointed) {
  TempDir d;
  write_swish_model(d);
  std::string config = d.write("train.yaml", "plugins: [" + plugin("swish") +
                                                 "]\nmodel: model.yaml\nthreads: 1\ndata:\n  train: {source: synthetic, "
                                                 "shape: [6], num_classes: 3, size: 24, batch_size: 4}\n"
                                                 "solver: {lr: 0.1, max_iter: 6}\n");
  CliResult r = run_poseidon("train " + config + " --quiet --set train.output_dir=" + d.file("run"));
  ASSERT_EQ(r.status, 0) << r.err;
  SafetensorsFile final = read_safetensors(d.file("run/final.safetensors"));
  ASSERT_TRUE(final.tensors.count("act.beta"));
  EXPECT_NE(final.tensors.at("act.beta").data.at(0), 1.f) << "beta starts at 1 and must have been trained";

  CliResult missing = run_poseidon("train " + config + " --set plugins=[nowhere.so]");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--set plugins=[nowhere.so]"), std::string::npos) << missing.err;  // where it came from
  EXPECT_NE(missing.err.find("nowhere.so': file not found"), std::string::npos) << missing.err;
}

// swish has no GPU implementation: in a GPU net it runs on the CPU, its data
// copied around it, and training ends where the CPU run ends. Such a net's
// steps are not captured as a CUDA graph, and the log names the layer.
TEST(Plugin, CpuOnlyLayerTrainsInAGpuNet) {
  POSEIDON_SKIP_WITHOUT_GPU();
  TempDir d;
  write_swish_model(d);
  std::string config = d.write("train.yaml", "model: model.yaml\nthreads: 1\ndata:\n  train: {source: synthetic, "
                                             "shape: [6], num_classes: 3, size: 24, batch_size: 4}\n"
                                             "solver: {lr: 0.1, max_iter: 6}\n");
  const std::string args = "train " + config + " --quiet --plugin " + plugin("swish");
  CliResult cpu = run_poseidon(args + " --set train.output_dir=" + d.file("cpu"));
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  CliResult gpu = run_poseidon("train " + config + " --plugin " + plugin("swish") +
                               " --set device=cuda --set train.output_dir=" + d.file("gpu"));
  ASSERT_EQ(gpu.status, 0) << gpu.err;
  EXPECT_NE(gpu.err.find("layer 'act' (swish): no GPU implementation, runs on the CPU"), std::string::npos) << gpu.err;
  EXPECT_NE(gpu.err.find("cuda graph: steps run uncaptured: layers that cannot be captured (a CPU layer in a GPU net, or one that says so): act (swish)"),
            std::string::npos)
      << gpu.err;
  SafetensorsFile a = read_safetensors(d.file("cpu/final.safetensors"));
  SafetensorsFile b = read_safetensors(d.file("gpu/final.safetensors"));
  for (const auto& [name, ta] : a.tensors) {
    if (name.rfind("optimizer.", 0) == 0) continue;
    ASSERT_TRUE(b.tensors.count(name)) << name;
    for (size_t i = 0; i < ta.data.size(); ++i)
      EXPECT_NEAR(ta.data[i], b.tensors.at(name).data[i], 1e-4) << name << "[" << i << "]";
  }
}

TEST(Plugin, CheckLayerPassesAGoodLayerAndFindsAPlantedOverwrite) {
  CliResult good = run_poseidon("check-layer swish --plugin " + plugin("swish") + " --shape 2,3,4");
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("swish.beta"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("gradients agree"), std::string::npos) << good.out;

  CliResult bad = run_poseidon("check-layer overwriting_double --plugin " + plugin("overwrite"));
  EXPECT_EQ(bad.status, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("input 0"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("96 mismatches"), std::string::npos) << bad.out;

  // A backward that drops a key's factor is right at the key's default
  // (scale 1): check-layer tries the key at another value too.
  CliResult dropped = run_poseidon("check-layer forgetful_scale --plugin " + plugin("dropped_term"));
  EXPECT_EQ(dropped.status, 1) << dropped.out << dropped.err;
  const size_t varied = dropped.out.find("with scale=1.7:");
  ASSERT_NE(varied, std::string::npos) << dropped.out;
  const size_t first_mismatch = dropped.out.find(" mismatches");
  ASSERT_NE(first_mismatch, std::string::npos) << dropped.out;
  EXPECT_GT(first_mismatch, varied) << "scale 1, as given, must pass:\n" << dropped.out;
  CliResult given = run_poseidon("check-layer forgetful_scale --given-values-only --plugin " + plugin("dropped_term"));
  EXPECT_EQ(given.status, 0) << given.out << given.err;

  CliResult shape = run_poseidon("check-layer relu --shape 2,x");
  EXPECT_EQ(shape.status, 2);
  EXPECT_NE(shape.err.find("--shape '2,x'"), std::string::npos) << shape.err;
}

struct LoadFailure {
  std::string library, reason;
};

class PluginLoadFailure : public ::testing::TestWithParam<LoadFailure> {};

TEST_P(PluginLoadFailure, ExitsTwoNamingTheLibraryAndTheReason) {
  const std::string library = GetParam().library.find('/') == std::string::npos ? plugin(GetParam().library)
                                                                                 : GetParam().library;
  for (const char* verb : {"layers", "summary models/lenet.yaml", "check-layer relu"}) {
    CliResult r = run_poseidon(std::string(verb) + " --plugin " + library);
    EXPECT_EQ(r.status, 2) << verb;
    EXPECT_NE(r.err.find("plug-in '" + library + "': " + GetParam().reason), std::string::npos) << verb << ": " << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, PluginLoadFailure,
    ::testing::Values(LoadFailure{"/no/such/plugin.so", "file not found"},
                      LoadFailure{"no_marker", "no symbol poseidon_plugin_abi_version"},
                      LoadFailure{"other_version",
                                  "built against layer contract version " + std::to_string(kLayerAbiVersion + 1) +
                                      ", this poseidon has version " + std::to_string(kLayerAbiVersion)},
                      LoadFailure{"builtin_type", "layer type 'relu' is already registered (built in)"}),
    [](const auto& info) { return std::to_string(info.index); });

}  // namespace
}  // namespace poseidon::testing
