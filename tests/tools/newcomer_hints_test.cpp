// What a newcomer trips on first. Each error says what was meant, not only
// what is wrong: a key at the wrong level names its full path, a model file
// given to `train` is recognised as one, an unknown layer type that no
// built-in name is close to points to plug-ins, a missing model file says
// where a relative path was looked up, and a model too large for memory is
// blamed on the key that made it large. `--version` answers; `--set
// key=null` removes a key; `test` notices weights of another model.
#include <gtest/gtest.h>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

const char* kModel = R"(name: tiny
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

// A training config in d/config.yaml whose model is `model` (relative to d).
std::string write_config(const TempDir& d, const std::string& model = "model.yaml") {
  return d.write("config.yaml", "model: " + model +
                                    "\nthreads: 1\ndata:\n  train: {source: synthetic, shape: [6], num_classes: 3, "
                                    "size: 8, batch_size: 4}\nsolver: {lr: 0.1, max_iter: 1}\ntrain: {output_dir: " +
                                    d.file("out") + "}\n");
}

TEST(NewcomerHints, VersionIsPrinted) {
  CliResult r = run_poseidon("--version");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("poseidon 0.", 0), 0u) << r.out;
}

TEST(NewcomerHints, KeyAtTheWrongLevelNamesItsFullPath) {
  TempDir d;
  d.write("model.yaml", kModel);
  CliResult r = run_poseidon("train " + write_config(d) + " --quiet --set output_dir=" + d.file("x"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown key 'output_dir'; did you mean 'train.output_dir'?"), std::string::npos) << r.err;

  CliResult lr = run_poseidon("train " + write_config(d) + " --quiet --set train.lr=0.5");
  EXPECT_EQ(lr.status, 2);
  EXPECT_NE(lr.err.find("unknown key 'lr'; did you mean 'solver.lr'?"), std::string::npos) << lr.err;
}

TEST(NewcomerHints, ModelFileGivenToTrainIsRecognised) {
  TempDir d;
  CliResult r = run_poseidon("train " + d.write("model.yaml", kModel) + " --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("this is a model file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("whose `model:` names this file"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("unknown key 'name'"), std::string::npos) << r.err;
}

TEST(NewcomerHints, UnknownLayerTypePointsToPlugins) {
  TempDir d;
  std::string model = kModel;
  model.insert(model.find("  - {name: loss"), "  - {name: act, type: swish}\n");
  d.write("model.yaml", model);
  CliResult r = run_poseidon("train " + write_config(d) + " --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown layer type 'swish'; if a plug-in library defines it, load it first with "
                       "--plugin PATH"),
            std::string::npos)
      << r.err;
}

TEST(NewcomerHints, MissingModelSaysRelativeToTheConfigsFolder) {
  TempDir d;
  CliResult r = run_poseidon("train " + write_config(d, "models/lenet.yaml") + " --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("looked up relative to the config's folder, '" + d.path().string() + "'"), std::string::npos)
      << r.err;
}

// A model too large for the machine is blamed on the key that made it
// large, not on the later layer whose working buffers first fail.
TEST(SizeError, NamesTheKeyThatMadeTheModelLarge) {
  TempDir d;
  std::string model = kModel;
  model.replace(model.find("num_output: 3"), 13, "num_output: 100000000000");
  model.insert(model.find("  - {name: loss"), "  - {name: fc2, type: fc, num_output: 3}\n");
  model.replace(model.find("inputs: [fc1, label]"), 20, "inputs: [fc2, label]");
  d.write("model.yaml", model);
  CliResult fc = run_poseidon("train " + write_config(d) + " --quiet");
  EXPECT_EQ(fc.status, 2);
  EXPECT_NE(fc.err.find("key 'layers.fc1.num_output': layer 'fc1' (fc): its parameter fc1.weight of shape "
                        "[100000000000, 6] (set by num_output: 100000000000) alone needs"),
            std::string::npos)
      << fc.err;

  d.write("model.yaml", R"(name: wide
inputs: {data: [1, 1000000, 1000000], label: []}
layers:
  - {name: conv1, type: conv, num_output: 2, kernel_size: 5}
  - {name: fc1, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)");
  CliResult input = run_poseidon("train " + write_config(d) + " --quiet");
  EXPECT_EQ(input.status, 2);
  EXPECT_NE(input.err.find("model.yaml:2:16: key 'inputs.data': net input 'data': a batch of 4 examples of shape "
                           "[1, 1000000, 1000000] alone needs"),
            std::string::npos)
      << input.err;
}

// `--set key=null` removes a key: switching the solver's type drops the old
// type's keys, and a key that is not there to remove is an error.
TEST(NullOverride, RemovesAKeySoTheSolverTypeCanBeSwitched) {
  TempDir d;
  d.write("model.yaml", kModel);
  const std::string config = d.write("config.yaml", "solver: {type: sgd, lr: 0.1, momentum: 0.9, max_iter: 1}\n" +
                                      std::string("model: model.yaml\nthreads: 1\ndata:\n  train: {source: synthetic, "
                                                  "shape: [6], num_classes: 3, size: 8, batch_size: 4}\ntrain: {"
                                                  "output_dir: ") +
                                      d.file("out") + "}\n");
  CliResult kept = run_poseidon("train " + config + " --quiet --set solver.type=adamw");
  EXPECT_EQ(kept.status, 2);
  EXPECT_NE(kept.err.find("'momentum' applies to sgd, rmsprop, not to type adamw (remove it: --set "
                          "solver.momentum=null)"),
            std::string::npos)
      << kept.err;

  CliResult removed = run_poseidon("train " + config + " --quiet --set solver.type=adamw --set solver.momentum=null");
  EXPECT_EQ(removed.status, 0) << removed.err;

  CliResult misspelt = run_poseidon("train " + config + " --quiet --set solver.momentun=null");
  EXPECT_EQ(misspelt.status, 2);
  EXPECT_NE(misspelt.err.find("no key 'momentun' to remove; did you mean 'momentum'?"), std::string::npos)
      << misspelt.err;
}

// Weights evaluated in a model that differs from theirs only in a layer
// without parameters: a warning naming the layer, an error with --strict.
TEST(TestWeights, OtherParameterFreeLayersWarnOrFailWithStrict) {
  TempDir d;
  d.write("model.yaml", kModel);
  const std::string data =
      "data:\n  train: {source: synthetic, shape: [6], num_classes: 3, size: 8, batch_size: 4}\n"
      "  test: {source: synthetic, shape: [6], num_classes: 3, size: 8, batch_size: 4}\n";
  const std::string config = d.write("config.yaml", "model: model.yaml\nthreads: 1\n" + data +
                                                        "solver: {lr: 0.1, max_iter: 1}\ntrain: {output_dir: " +
                                                        d.file("out") + "}\n");
  ASSERT_EQ(run_poseidon("train " + config + " --quiet").status, 0);
  const std::string weights = " --weights " + d.file("out/final.safetensors");

  CliResult same = run_poseidon("test " + config + weights);
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(same.err.find("warning"), std::string::npos) << same.err;

  std::string with_relu = kModel;
  with_relu.insert(with_relu.find("  - {name: loss"), "  - {name: act, type: relu}\n");
  d.write("model.yaml", with_relu);
  CliResult warned = run_poseidon("test " + config + weights);
  EXPECT_EQ(warned.status, 0) << warned.err;
  EXPECT_NE(warned.err.find("warning: " + d.file("out/final.safetensors") +
                            ": the weights were saved from a model with other layers: the model has act (relu), "
                            "which the weights' model had not"),
            std::string::npos)
      << warned.err;
  CliResult strict = run_poseidon("test " + config + weights + " --strict");
  EXPECT_EQ(strict.status, 2);
  EXPECT_NE(strict.err.find("act (relu)"), std::string::npos) << strict.err;

  // The other way: weights of the model with the ReLU, a model without it.
  ASSERT_EQ(run_poseidon("train " + config + " --quiet --set train.output_dir=" + d.file("relu")).status, 0);
  d.write("model.yaml", kModel);
  CliResult lacking = run_poseidon("test " + config + " --strict --weights " + d.file("relu/final.safetensors"));
  EXPECT_EQ(lacking.status, 2);
  EXPECT_NE(lacking.err.find("the weights' model had act (relu), which this model has not"), std::string::npos)
      << lacking.err;
}

}  // namespace
}  // namespace poseidon::testing
