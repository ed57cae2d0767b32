// Malformed inputs: each must end with exit status 2 and one clear line on
// stderr naming the file and the line or key at fault; nothing crashes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "tools/cli_runner.h"

namespace poseidon::testing {

namespace {

const char* kModel = R"(name: tiny
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5}
  - {name: pool1, type: pool, kernel_size: 2}
  - {name: fc1, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

std::string config_text(const TempDir& d, const std::string& model = "model.yaml") {
  return "model: " + model +
         "\nseed: 1\nthreads: 1\ndata:\n  train: {source: idx, images: " + d.file("img.idx") +
         ", labels: " + d.file("lbl.idx") +
         ", batch_size: 4}\nsolver: {lr: 0.01, momentum: 0.9, max_iter: 2}\ntrain: {display: 0, output_dir: " +
         d.file("out") + "}\n";
}

struct Case {
  std::string name;
  // Prepares the directory and returns the CLI arguments.
  std::function<std::string(TempDir&)> setup;
  std::string file;    // the file the message must name
  std::string locator; // ":<line>" or "key '...'" or another precise pointer
  std::string detail;  // a phrase the message must contain
};

std::string replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << "test setup: '" << from << "' not found";
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// A valid setup with one edit applied to the model and/or config.
std::string standard(TempDir& d, const std::string& model, const std::string& config, const std::string& extra = "") {
  write_idx_dataset(d.file("img.idx"), d.file("lbl.idx"), 16, 10, 3);
  d.write("model.yaml", model);
  return "train " + d.write("config.yaml", config) + " --quiet" + extra;
}

std::vector<Case> cases() {
  return {
      {"yaml_syntax", [](TempDir& d) { return standard(d, kModel, config_text(d) + "solver: [unclosed\n"); },
       "config.yaml", ":9", "YAML syntax error"},
      {"unknown_config_key", [](TempDir& d) { return standard(d, kModel, config_text(d) + "solvr: {}\n"); },
       "config.yaml", ":8", "unknown key 'solvr'"},
      {"unknown_layer_type",
       [](TempDir& d) { return standard(d, replace(kModel, "type: fc", "type: fully_connected"), config_text(d)); },
       "model.yaml", ":6", "known types: "},
      {"wrong_value_type",
       [](TempDir& d) { return standard(d, kModel, replace(config_text(d), "lr: 0.01", "lr: fast")); },
       "config.yaml", "solver.lr", "expected a number, found 'fast'"},
      {"missing_blob",
       [](TempDir& d) { return standard(d, replace(kModel, "inputs: [fc1, label]", "inputs: [fc9, label]"), config_text(d)); },
       "model.yaml", ":7", "blob 'fc9'"},
      {"cycle",
       [](TempDir& d) {
         std::string m = replace(kModel, "inputs: data, num_output: 4", "inputs: fc1, num_output: 4");
         return standard(d, m, config_text(d));
       },
       "model.yaml", ":4", "cycle"},
      {"shape_mismatch",
       [](TempDir& d) {
         std::string m = std::string(kModel) + "  - {name: both, type: sum, inputs: [conv1, pool1]}\n";
         return standard(d, m, config_text(d));
       },
       "model.yaml", ":8", "shape"},
      {"missing_data_file",
       [](TempDir& d) { return standard(d, kModel, replace(config_text(d), d.file("img.idx"), d.file("nope.idx"))); },
       "config.yaml", ":5", "data file not found"},
      {"key_is_a_list",
       [](TempDir& d) { return standard(d, kModel, config_text(d) + "[seed, threads]: 1\n"); },
       "config.yaml", ":8", "a key must be a plain name"},
      {"model_path_too_long",  // the system refuses the name itself: still "not found", not an exception
       [](TempDir& d) { return standard(d, kModel, config_text(d, std::string(300, 'm') + ".yaml")); },
       "config.yaml", ":1", "not found"},
      {"corrupt_idx_header",
       [](TempDir& d) {
         std::string args = standard(d, kModel, config_text(d));
         std::ofstream(d.file("img.idx"), std::ios::binary) << std::string("\x01\x02\x08\x03garbage", 11);
         return args;
       },
       "img.idx", "config.yaml:5", "not an IDX file"},
      {"truncated_checkpoint",
       [](TempDir& d) {
         d.write("w.safetensors", std::string("\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13));
         return standard(d, kModel, config_text(d), " --weights " + d.file("w.safetensors"));
       },
       "w.safetensors", "w.safetensors", "header"},
      {"checkpoint_wrong_shape",
       [](TempDir& d) {
         // Train once with 4 conv channels, then load those weights into 6 channels.
         std::string args = standard(d, kModel, config_text(d));
         run_poseidon(args);
         d.write("model.yaml", replace(kModel, "num_output: 4", "num_output: 6"));
         return args + " --weights " + d.file("out/final.safetensors");
       },
       "final.safetensors", "conv1.weight", "[4, 1, 5, 5]"},
      {"unknown_layer_key",
       [](TempDir& d) { return standard(d, replace(kModel, "kernel_size: 5", "kernel: 5"), config_text(d)); },
       "model.yaml", ":4", "unknown key 'kernel'"},
      {"missing_required_key",
       [](TempDir& d) { return standard(d, replace(kModel, "num_output: 10", "bias: true"), config_text(d)); },
       "model.yaml", "num_output", "missing required key"},
      {"negative_batch",
       [](TempDir& d) { return standard(d, kModel, replace(config_text(d), "batch_size: 4", "batch_size: -4")); },
       "config.yaml", "batch_size", "positive"},
      {"model_file_missing",
       [](TempDir& d) { return standard(d, kModel, config_text(d, "absent.yaml")); },
       "config.yaml", ":1", "absent.yaml"},
      {"unknown_override_key",
       [](TempDir& d) { return standard(d, kModel, config_text(d), " --set solver.learning_rate=0.1"); },
       "--set solver.learning_rate=0.1", "key 'solver.learning_rate'", "unknown key"},
      {"bad_device",
       [](TempDir& d) { return standard(d, kModel, config_text(d) + "device: gpu7\n"); },
       "config.yaml", ":8", "unknown device"},
      {"data_shape_mismatch",
       [](TempDir& d) { return standard(d, replace(kModel, "[1, 28, 28]", "[3, 32, 32]"), config_text(d)); },
       "config.yaml", ":5", "[3, 32, 32]"},
      {"duplicate_layer_name",
       [](TempDir& d) { return standard(d, replace(kModel, "name: pool1", "name: conv1"), config_text(d)); },
       "model.yaml", ":5", "duplicate layer name"},
      {"label_out_of_range",
       [](TempDir& d) {
         std::string args = standard(d, kModel, config_text(d));
         write_idx_dataset(d.file("img.idx"), d.file("lbl.idx"), 16, 12, 3);  // labels up to 11, 10 classes
         return args;
       },
       "lbl.idx", "config.yaml:5", "out of range for layer 'loss' (softmax_loss), which takes 10 classes"},
      {"empty_config", [](TempDir& d) { return standard(d, kModel, ""); }, "config.yaml", "model",
       "missing required key"},
      {"idx_payload_truncated",
       [](TempDir& d) {
         std::string args = standard(d, kModel, config_text(d));
         write_idx(d.file("lbl.idx"), {16}, std::vector<uint8_t>(10, 1));
         return args;
       },
       "lbl.idx", "config.yaml:5", "payload"},
      // Misspellings name what was meant; layers are named by their names.
      {"misspelt_config_key", [](TempDir& d) { return standard(d, kModel, config_text(d) + "solvr: {}\n"); },
       "config.yaml", "key 'solvr'", "did you mean 'solver'?"},
      {"misspelt_layer_key",
       [](TempDir& d) { return standard(d, replace(kModel, "kernel_size: 5", "kernel_sise: 5"), config_text(d)); },
       "model.yaml", "key 'layers.conv1.kernel_sise'", "did you mean 'kernel_size'?"},
      {"misspelt_layer_type",
       [](TempDir& d) { return standard(d, replace(kModel, "type: fc", "type: fcc"), config_text(d)); },
       "model.yaml", "key 'layers.fc1.type'", "unknown layer type 'fcc'; did you mean 'fc'?"},
      {"misspelt_blob",
       [](TempDir& d) {
         return standard(d, replace(kModel, "inputs: [fc1, label]", "inputs: [fc2, label]"), config_text(d));
       },
       "model.yaml", "key 'layers.loss.inputs'",
       "blob 'fc2', which no layer or net input produces; did you mean 'fc1'?"},
      {"misspelt_override_of_a_layer",
       [](TempDir& d) { return standard(d, kModel, config_text(d), " --set net.layers.fc11.num_output=3"); },
       "--set", "layers.fc11.num_output", "no list element 'fc11'; did you mean 'fc1'?"},
      {"value_error_names_the_layer",
       [](TempDir& d) { return standard(d, replace(kModel, "num_output: 10", "num_output: -1"), config_text(d)); },
       "model.yaml", "key 'layers.fc1.num_output'", "num_output must be at least 1"},
      {"synthetic_data_of_another_shape",
       [](TempDir& d) {
         std::string c = replace(config_text(d),
                                 "{source: idx, images: " + d.file("img.idx") + ", labels: " + d.file("lbl.idx") + ",",
                                 "{source: synthetic, shape: [1, 32, 32], num_classes: 10, size: 16,");
         return standard(d, kModel, c);
       },
       "config.yaml", "data.train", "(synthetic data: --set 'data.train.shape=[1, 28, 28]')"},
      {"resume_from_weights_only",
       [](TempDir& d) {
         d.write("w.safetensors", "");
         return standard(d, kModel, config_text(d), " --resume " + d.file("w.safetensors"));
       },
       "w.safetensors", "w.safetensors", "shorter"},
      // YAML parsers keep the first of two equal keys; both places are named.
      {"duplicate_config_key", [](TempDir& d) { return standard(d, kModel, config_text(d) + "seed: 3\n"); },
       "config.yaml", ":8:1: key 'seed'", "duplicate key 'seed' (first at line 2, column 1)"},
      {"duplicate_layer_key",
       [](TempDir& d) {
         return standard(d, replace(kModel, "num_output: 10}", "num_output: 10, num_output: 12}"), config_text(d));
       },
       "model.yaml", ":6:43: key 'layers.fc1.num_output'", "duplicate key 'num_output' (first at line 6, column 27)"},
      {"duplicate_key_in_override",
       [](TempDir& d) { return standard(d, kModel, config_text(d), " --set 'solver={lr: 0.1, lr: 0.2}'"); },
       "--set solver={lr: 0.1, lr: 0.2}", "key 'lr'", "duplicate key 'lr'"},
      // Values from --set are reported at the override, not at a line of the file.
      {"override_wrong_type",
       [](TempDir& d) { return standard(d, kModel, config_text(d), " --set solver.lr=abc"); },
       "--set solver.lr=abc", "key 'solver.lr'", "expected a number, found 'abc'"},
      {"net_override_wrong_type",
       [](TempDir& d) { return standard(d, kModel, config_text(d), " --set net.layers.fc1.num_output=abc"); },
       "--set net.layers.fc1.num_output=abc", "key 'layers.fc1.num_output'", "expected an integer, found 'abc'"},
      {"config_is_a_directory",
       [](TempDir& d) {
         std::filesystem::create_directories(d.file("conf.d"));
         return "train " + d.file("conf.d") + " --quiet";
       },
       "conf.d", "conf.d:", "is a directory, not a file"},
      {"model_is_a_directory",
       [](TempDir& d) {
         std::filesystem::create_directories(d.file("models"));
         return standard(d, kModel, config_text(d, "models"));
       },
       "config.yaml", ":1:8: key 'model'", "is a directory, not a file"},
      {"data_file_is_a_directory",
       [](TempDir& d) {
         std::string args = standard(d, kModel, config_text(d));
         std::filesystem::remove(d.file("img.idx"));
         std::filesystem::create_directories(d.file("img.idx"));
         return args;
       },
       "img.idx", "config.yaml:5", "data file is a directory, not a file"},
      {"output_dir_is_a_file",
       [](TempDir& d) {
         d.write("out", "a file where the run's folder should be");
         return standard(d, kModel, config_text(d));
       },
       "config.yaml", ":7:33: key 'train.output_dir'", "is a file, not a directory"},
      {"output_dir_under_a_file",
       [](TempDir& d) {
         d.write("taken", "a file");
         return standard(d, kModel, replace(config_text(d), d.file("out"), d.file("taken") + "/run"));
       },
       "config.yaml", "key 'train.output_dir'", "taken' is a file, not a directory"},
      // Sizes beyond the machine's memory, with the bytes needed, before any work.
      {"parameters_beyond_memory",
       [](TempDir& d) {
         std::string m = replace(kModel, "{name: fc1, type: fc, num_output: 10}",
                                 "{name: fc1, type: fc, num_output: 2000000000}\n  - {name: fc2, type: fc, num_output: 10}");
         return standard(d, replace(m, "inputs: [fc1, label]", "inputs: [fc2, label]"), config_text(d));
       },
       "model.yaml", ":6:39: key 'layers.fc1.num_output'",
       "its parameter fc1.weight of shape [2000000000, 576] (set by num_output: 2000000000) alone needs"},
      {"batch_beyond_memory",
       [](TempDir& d) {
         return standard(d, kModel, config_text(d), " --set data.train.batch_size=1000000000");
       },
       "model.yaml", ":2:16: key 'inputs.data'", "a batch of 1000000000 examples of shape [1, 28, 28] alone needs"},
      {"list_label_out_of_range",
       [](TempDir& d) {
         d.write("list.txt", "a.png 1\nb.png 0\n\nc.png 12\nd.png 3\n");
         std::string m = replace(kModel, "[1, 28, 28]", "[3, 28, 28]");
         std::string c = replace(config_text(d), "source: idx, images: " + d.file("img.idx") + ", labels: " + d.file("lbl.idx"),
                                 "source: image_list, list: list.txt, crop: 28");
         return standard(d, m, c);
       },
       "list.txt:4", "config.yaml:5", "label 12 of '"},
  };
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

}  // namespace

class BadInput : public ::testing::TestWithParam<Case> {};

TEST_P(BadInput, ExitsTwoWithOneClearLine) {
  const Case& c = GetParam();
  TempDir dir;
  std::string args = c.setup(dir);
#ifndef POSEIDON_HAVE_IMAGES
  // A build without the image pipeline (the GPU kit's) refuses image sources whatever is in them.
  std::ifstream config(dir.file("config.yaml"));
  const std::string text((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  if (text.find("source: image_") != std::string::npos) GTEST_SKIP() << "no image sources (POSEIDON_IMAGES=OFF)";
#endif
  CliResult r = run_poseidon(args);
  EXPECT_EQ(r.status, 2) << "stderr: " << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "expected exactly one line, got:\n" << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  if (!c.file.empty()) {
    EXPECT_NE(r.err.find(c.file), std::string::npos) << "file not named: " << r.err;
  }
  EXPECT_NE(r.err.find(c.locator), std::string::npos) << "no '" << c.locator << "' in: " << r.err;
  EXPECT_NE(r.err.find(c.detail), std::string::npos) << "no '" << c.detail << "' in: " << r.err;
}

INSTANTIATE_TEST_SUITE_P(Cli, BadInput, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(BadInput, AtLeastFifteenCases) { EXPECT_GE(cases().size(), 15u); }

// A warm-up as long as the run is allowed but almost certainly not meant.
TEST(BadInput, WarmupLongerThanTheRunIsAWarning) {
  TempDir d;
  std::string args = standard(d, kModel, replace(config_text(d), "max_iter: 2}", "max_iter: 2, warmup_iters: 5}"));
  CliResult r = run_poseidon(args);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: " + d.file("config.yaml") + ":6:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("key 'solver.warmup_iters': the warm-up (5 iterations) is not shorter than the run"),
            std::string::npos)
      << r.err;
  CliResult shorter = run_poseidon(args + " --set solver.warmup_iters=1");
  EXPECT_EQ(shorter.status, 0) << shorter.err;
  EXPECT_EQ(shorter.err.find("warning"), std::string::npos) << shorter.err;
}

// `deterministic` takes true or false; anything else is refused at its key.
TEST(BadInput, DeterministicIsABoolean) {
  TempDir d;
  CliResult r = run_poseidon(
      standard(d, kModel, replace(config_text(d), "threads: 1\n", "threads: 1\ndeterministic: sometimes\n")));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(d.file("config.yaml") + ":4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'deterministic'"), std::string::npos) << r.err;
  CliResult ok =
      run_poseidon(standard(d, kModel, replace(config_text(d), "threads: 1\n", "threads: 1\ndeterministic: false\n")));
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// bf16 on a CPU without bfloat16 kernels (oneDNN held to AVX2 here, or a
// build without oneDNN, as the GPU kit's) runs float32 kernels on rounded
// operands, no faster than fp32, and says so: a warning at the key, and
// `poseidon info`.
TEST(BadInput, Bf16WithoutBfloat16KernelsIsAWarning) {
#ifdef POSEIDON_HAVE_DNNL
  const std::string why = "no bfloat16 kernels in oneDNN before AVX-512; its instruction set here is avx2";
#else
  const std::string why = "this build has no oneDNN";
#endif
  ::setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 1);
  TempDir d;
  CliResult r =
      run_poseidon(standard(d, kModel, replace(config_text(d), "threads: 1\n", "threads: 1\nprecision: bf16\n")));
  CliResult info = run_poseidon("info");
  ::unsetenv("ONEDNN_MAX_CPU_ISA");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: " + d.file("config.yaml") + ":4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("key 'precision': on this CPU conv and fc run float32 kernels on operands rounded to "
                       "bfloat16 (" + why + ")"),
            std::string::npos)
      << r.err;
  EXPECT_NE(info.out.find("CPU bf16           float32 kernels on operands rounded to bfloat16 (" + why),
            std::string::npos)
      << info.out;
}

}  // namespace poseidon::testing
