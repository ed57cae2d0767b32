// The benchmark models and their configs: exact parameter totals from
// `poseidon summary --json` (docs/REFERENCE.md's table, torchvision's
// counts), model variables and input sizes overridden from the command line,
// and every training config of a model running one step at a reduced size on
// its own kind of data (the synthetic benchmarks without a final checkpoint).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#ifdef POSEIDON_HAVE_IMAGES
#include <opencv2/imgcodecs.hpp>
#endif

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

const std::string kRoot = POSEIDON_SOURCE_DIR;

int64_t total_params(const std::string& args) {
  CliResult r = run_poseidon("summary " + args + " --json");
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  if (r.status != 0) return -1;
  return nlohmann::json::parse(r.out).at("total_params").get<int64_t>();
}

struct SizeCase {
  std::string name;
  std::string args;  // model file and overrides
  int64_t params;
};

void PrintTo(const SizeCase& c, std::ostream* os) { *os << c.name; }

class ModelSizes : public ::testing::TestWithParam<SizeCase> {};

TEST_P(ModelSizes, SummaryTotalIsExact) { EXPECT_EQ(total_params(kRoot + "/" + GetParam().args), GetParam().params); }

INSTANTIATE_TEST_SUITE_P(
    Models, ModelSizes,
    ::testing::Values(SizeCase{"vgg19", "models/vgg19.yaml", 143'667'240},
                      SizeCase{"vgg19_22k", "models/vgg19_22k.yaml", 229'052'817},
                      // Adaptive pooling to 7x7 keeps every parameter at a reduced input.
                      SizeCase{"vgg19_22k_at_32", "models/vgg19_22k.yaml --set vars.size=32", 229'052'817},
                      // bench/ddp.sh's vgg19_22k_32_narrow: bench/torch_models.py's Vgg19Narrow has as many.
                      SizeCase{"vgg19_22k_32_narrow",
                               "models/vgg19_22k.yaml --set vars.size=32 --set vars.width=32 --set vars.hidden=512",
                               22'898'033},
                      // The input size given outright: the size variable it replaces is dropped.
                      SizeCase{"vgg19_inputs_at_64", "models/vgg19.yaml --set 'inputs.data=[3,64,64]'", 143'667'240},
                      SizeCase{"vgg19_22k_config_inputs_at_64",
                               "configs/vgg19_22k_synthetic.yaml --set 'net.inputs.data=[3,64,64]'", 229'052'817},
                      SizeCase{"inception_v3", "models/inception_v3.yaml", 27'161'264},
                      SizeCase{"inception_v3_without_aux", "models/inception_v3.yaml --set vars.aux=false", 23'834'568},
                      SizeCase{"resnet50", "models/resnet50.yaml", 25'557'032},
                      // Through a training config: 10 classes shrink the classifier from 2048x1000+1000.
                      SizeCase{
                          "inception_v3_config_10_classes",
                          "configs/inception_v3_synthetic.yaml --set net.vars.aux=false --set net.vars.num_classes=10",
                          23'834'568 - 2049 * (1000 - 10)}),
    [](const auto& info) { return info.param.name; });

// The auxiliary head needs the full input; at a small one the error says how to leave it out.
TEST(ModelSizes, InceptionAtASmallInputSaysAuxFalseIsTheFix) {
  CliResult r = run_poseidon("summary " + kRoot + "/models/inception_v3.yaml --set vars.size=96");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is in the model because vars.aux is true: --set net.vars.aux=false leaves it out"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(total_params(kRoot + "/models/inception_v3.yaml --set vars.size=96 --set vars.aux=false"), 23'834'568);
}

struct ConfigCase {
  std::string config;  // configs/<config>.yaml
  std::string reduce;  // overrides that make it small
};

void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.config; }

// VGG's hidden classifier layers (list elements 6 and 9 of the model) hold
// most of its parameters; narrowing them keeps a training step light.
const std::string kNarrowVgg = " --set net.layers.6.num_output=16 --set net.layers.9.num_output=16";

#ifdef POSEIDON_HAVE_IMAGES
// Two classes of PNG and JPEG images of odd sizes.
void write_image_folder(const std::filesystem::path& root) {
  cv::Mat image(53, 61, CV_8UC3);
  for (const char* cls : {"cat", "dog"}) {
    std::filesystem::create_directories(root / cls);
    for (int i = 0; i < 2; ++i) {
      cv::randu(image, 0, 255);
      ASSERT_TRUE(cv::imwrite((root / cls / (std::to_string(i) + (i ? ".jpg" : ".png"))).string(), image));
    }
  }
}
#endif

class ModelConfigs : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(ModelConfigs, TrainOneStepAtAReducedSize) {
  const ConfigCase& c = GetParam();
  TempDir d;
  std::string args = "train " + kRoot + "/configs/" + c.config + ".yaml --quiet --set solver.max_iter=1" +
                     " --set data.train.batch_size=2 --set train.output_dir=" + d.file("out") + c.reduce;
  if (c.config.find("_images") != std::string::npos) {
#ifndef POSEIDON_HAVE_IMAGES
    GTEST_SKIP() << "built without the image pipeline (POSEIDON_IMAGES=OFF)";
#else
    write_image_folder(d.path() / "images");
    const std::string root = d.file("images");
    args += " --set data.train.root=" + root + " --set data.test.root=" + root +
            " --set data.test.batch_size=2 --set train.test_iters=1 --set net.vars.num_classes=2";
#endif
  }
  CliResult r = run_poseidon(args);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  // A synthetic benchmark only times training: train.final_checkpoint is false.
  const bool synthetic = c.config.find("_synthetic") != std::string::npos;
  EXPECT_EQ(std::filesystem::exists(d.file("out/final.safetensors")), !synthetic) << r.err;
  // The run's summary record says so.
  std::ifstream metrics(d.file("out/metrics.jsonl"));
  nlohmann::json summary;
  for (std::string line; std::getline(metrics, line);)
    if (nlohmann::json record = nlohmann::json::parse(line); record["type"] == "summary") summary = record;
  ASSERT_FALSE(summary.is_null()) << "no summary record";
  EXPECT_EQ(summary["checkpoints"].size(), synthetic ? 0u : 1u);
  EXPECT_EQ(summary.contains("no_final_checkpoint"), synthetic);
}

const std::string kSynthetic32 = " --set net.vars.size=32 --set 'data.train.shape=[3,32,32]'";
const std::string kImages32 =
    " --set net.vars.size=32 --set data.train.resize=36 --set data.train.crop=32 --set data.test.resize=36"
    " --set data.test.crop=32";

INSTANTIATE_TEST_SUITE_P(
    Configs, ModelConfigs,
    ::testing::Values(ConfigCase{"vgg19_synthetic", kSynthetic32 + kNarrowVgg},
                      ConfigCase{"vgg19_22k_synthetic", kSynthetic32 + kNarrowVgg},
                      ConfigCase{"inception_v3_synthetic",
                                 " --set net.vars.aux=false --set net.vars.size=75 --set 'data.train.shape=[3,75,75]'"},
                      ConfigCase{"resnet50_synthetic", kSynthetic32},
                      ConfigCase{"vgg19_images", kImages32 + kNarrowVgg},
                      ConfigCase{"vgg19_22k_images", kImages32 + kNarrowVgg},
                      ConfigCase{"inception_v3_images",
                                 " --set net.vars.aux=false --set net.vars.size=75 --set data.train.resize=80"
                                 " --set data.train.crop=75 --set data.test.resize=80 --set data.test.crop=75"},
                      ConfigCase{"resnet50_images", kImages32}),
    [](const auto& info) { return info.param.config; });

}  // namespace
}  // namespace poseidon::testing
