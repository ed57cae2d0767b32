// `poseidon simulate` from the outside: bad profiles end with status 2 and a
// message naming the file and the layer; the bytes it reports are the ones
// `poseidon plan` prints for the same settings; the shipped profiles cover
// every layer of their models and split the reference iteration as stated.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

const std::string kRoot = POSEIDON_SOURCE_DIR;

const char* kModel = R"(name: tiny
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 8, kernel_size: 3}
  - {name: fc1, type: fc, inputs: conv1, num_output: 256}
  - {name: fc2, type: fc, inputs: fc1, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
)";

TEST(SimulateCli, MissingProfileFileIsStatus2NamingIt) {
  TempDir dir;
  const std::string model = dir.write("tiny.yaml", kModel);
  CliResult r = run_poseidon("simulate " + model + " --workers 2 --bandwidth 10 --profile " + dir.file("none.json"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(dir.file("none.json")), std::string::npos) << r.err;
}

TEST(SimulateCli, ProfileMissingALayerIsStatus2NamingFileAndLayer) {
  TempDir dir;
  const std::string model = dir.write("tiny.yaml", kModel);
  const std::string profile = dir.write("p.json", R"({"batch": 32, "update_ms": 0, "layers": [
    {"name": "conv1", "forward_ms": 1, "backward_ms": 2}, {"name": "fc1", "forward_ms": 1, "backward_ms": 2},
    {"name": "loss", "forward_ms": 0, "backward_ms": 0}]})");
  CliResult r = run_poseidon("simulate " + model + " --workers 2 --bandwidth 10 --profile " + profile);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find(profile), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'fc2'"), std::string::npos) << r.err;
}

TEST(SimulateCli, BytesMatchPlanAndOneWorkerIsSpeedupOne) {
  TempDir dir;
  const std::string model = dir.write("tiny.yaml", kModel);
  CliResult sim = run_poseidon("simulate " + model +
                               " --workers 1,4 --bandwidth 10 --latency 20 --scheme hybrid,ps --gflops 1e6 --json");
  ASSERT_EQ(sim.status, 0) << sim.err;
  CliResult plan = run_poseidon("plan " + model + " --workers 4 --batch 32 --bandwidth 10 --latency 20 --gflops 1e6 --json");
  ASSERT_EQ(plan.status, 0) << plan.err;
  const nlohmann::json s = nlohmann::json::parse(sim.out), p = nlohmann::json::parse(plan.out);
  ASSERT_EQ(s.at("runs").size(), 4u);
  std::map<std::string, double> planned = {{"hybrid", p["total"]["hybrid"]["bytes"].get<double>()},
                                           {"ps", p["total"]["all_ps"]["bytes"].get<double>()}};
  EXPECT_LT(planned["hybrid"], planned["ps"]) << "fc1 should use SFB at 4 workers";
  for (const nlohmann::json& run : s.at("runs")) {
    const std::string scheme = run.at("scheme");
    if (run.at("workers") == 1) {
      EXPECT_DOUBLE_EQ(run.at("speedup").get<double>(), 1.0) << scheme;
      EXPECT_DOUBLE_EQ(run.at("iteration_ms").get<double>(), s.at("single_iteration_ms").get<double>());
    } else {
      EXPECT_NEAR(run.at("bytes_per_worker").get<double>(), planned[scheme], 1e-9 * planned[scheme]) << scheme;
      EXPECT_EQ(run.at("links").size(), 4u);
      EXPECT_GT(run.at("mean_link_utilisation").get<double>(), 0);
      EXPECT_LE(run.at("max_link_utilisation").get<double>(), 1 + 1e-9);
    }
  }
}

// The shipped profiles split the reference design's iteration over the layers
// by FLOPs, forward one third and backward two thirds of each layer's share.
void check_shipped_profile(const std::string& name, const std::string& model) {
  std::ifstream in(kRoot + "/profiles/" + name);
  ASSERT_TRUE(in) << name;
  const nlohmann::json p = nlohmann::json::parse(in);
  EXPECT_EQ(p.at("batch"), 32);
  double total = 0;
  for (const nlohmann::json& l : p.at("layers")) {
    const double f = l.at("forward_ms"), b = l.at("backward_ms");
    EXPECT_NEAR(b, 2 * f, 1e-9 * (1 + b)) << l.at("name");
    total += f + b;
  }
  EXPECT_NEAR(total + p.at("update_ms").get<double>(), p.at("iteration_ms").get<double>(), 1e-6) << name;
  CliResult r = run_poseidon("simulate " + kRoot + "/models/" + model + " --profile " + kRoot + "/profiles/" + name +
                             " --workers 1 --bandwidth 10 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(nlohmann::json::parse(r.out).at("single_iteration_ms").get<double>(), p.at("iteration_ms").get<double>(),
              1e-6);
}

TEST(SimulateCli, ShippedVgg19_22kProfileIsTheReferenceIteration) {
  check_shipped_profile("vgg19_22k_b32.json", "vgg19_22k.yaml");
  std::ifstream in(kRoot + "/profiles/vgg19_22k_b32.json");
  EXPECT_NEAR(nlohmann::json::parse(in).at("iteration_ms").get<double>(), 925, 1e-9) << "docs/REFERENCE.md: 0.925 s";
}

TEST(SimulateCli, ShippedInceptionV3ProfileCoversTheModel) { check_shipped_profile("inception_v3_b32.json", "inception_v3.yaml"); }

// Every number depends on where the compute times come from, so the output
// says it, warns when they are this machine's GEMM estimate, and explains an
// efficiency above 100% under the table.
TEST(SimulateCli, SaysWhereComputeTimesComeFrom) {
  TempDir dir;
  const std::string model = dir.write("tiny.yaml", kModel);
  const std::string profile = dir.write("p.json", R"({"batch": 32, "update_ms": 1, "layers": [
    {"name": "conv1", "forward_ms": 1, "backward_ms": 2}, {"name": "fc1", "forward_ms": 1, "backward_ms": 2},
    {"name": "fc2", "forward_ms": 1, "backward_ms": 2}, {"name": "loss", "forward_ms": 0, "backward_ms": 0}]})");
  const std::string rows = " --workers 1,2 --bandwidth 10";
  const std::string footer = "efficiency: speed-up / P. It can pass 100%";

  CliResult estimated = run_poseidon("simulate " + model + rows);
  ASSERT_EQ(estimated.status, 0) << estimated.err;
  EXPECT_NE(estimated.err.find("warning: no --profile: the compute times are an estimate from this machine's GEMM"),
            std::string::npos)
      << estimated.err;
  EXPECT_NE(estimated.out.find("compute times: estimated: forward FLOPs at"), std::string::npos) << estimated.out;
  EXPECT_NE(estimated.out.find("(a GEMM timed on this machine)"), std::string::npos) << estimated.out;
  EXPECT_NE(estimated.out.find(footer), std::string::npos) << estimated.out;

  CliResult given = run_poseidon("simulate " + model + rows + " --gflops 100");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_EQ(given.err.find("warning"), std::string::npos) << given.err;
  EXPECT_NE(given.out.find("(the rate --gflops gave)"), std::string::npos) << given.out;

  CliResult measured = run_poseidon("simulate " + model + rows + " --profile " + profile + " --gflops 100 --json");
  ASSERT_EQ(measured.status, 0) << measured.err;
  EXPECT_EQ(nlohmann::json::parse(measured.out).at("compute_source"), "measured, from the profile " + profile);
}

}  // namespace
}  // namespace poseidon::testing
