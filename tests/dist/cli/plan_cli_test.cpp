// `poseidon plan`: HybComm's choice and the numbers each rank moves, checked
// against docs/REFERENCE.md's cost model with the figures docs/REFERENCE.md gives for
// VGG19-22K (conv layers 20,024,384 parameters; fc6 25088->4096, fc7
// 4096->4096, fc8 4096->21841), and the SFB/PS boundary P*K*(M+N) <= 2*M*N.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

nlohmann::json plan_json(const std::string& args) {
  CliResult r = run_poseidon("plan " + args + " --json");
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// Numbers moved per rank per iteration, docs/REFERENCE.md, P workers that are also the P servers.
double ps_numbers(double s, double p) { return 2 * s * (p + p - 2) / p; }
double sfb_numbers(double m, double n, double k, double p) { return 2 * k * (p - 1) * (m + n); }

TEST(PlanCli, Vgg19_22kAtEightWorkersMatchesThePaperFormulas) {
  // The SFB rebuild GEMM at 6 TFLOP/s: a GPU of the paper's class, not this CPU.
  nlohmann::json plan = plan_json(std::string(POSEIDON_SOURCE_DIR) +
                                  "/configs/vgg19_22k_synthetic.yaml --workers 8 --batch 32 --bandwidth 10 "
                                  "--gflops 6000");
  ASSERT_FALSE(plan.is_null());
  const double p = 8, k = 32;
  const double conv = 20024384, fc6 = 25088.0 * 4096 + 4096, fc7 = 4096.0 * 4096 + 4096, fc8 = 4096.0 * 21841 + 21841;
  ASSERT_EQ(conv + fc6 + fc7 + fc8, 229052817.0) << "docs/REFERENCE.md's parameter count";
  std::map<std::string, std::string> scheme;
  double conv_numbers = 0;
  for (const auto& l : plan["layers"]) {
    scheme[l["name"]] = l["scheme"];
    if (l["type"] == "conv") conv_numbers += l["cost"]["numbers"].get<double>();
  }
  EXPECT_EQ(scheme["classifier.0"], "sfb");
  EXPECT_EQ(scheme["classifier.3"], "sfb");
  EXPECT_EQ(scheme["classifier.6"], "sfb");
  for (const auto& [name, s] : scheme) {
    if (name.rfind("features.", 0) == 0) {
      EXPECT_EQ(s, "ps") << name;
    }
  }
  EXPECT_EQ(conv_numbers, ps_numbers(conv, p));
  const double hybrid = ps_numbers(conv, p) + sfb_numbers(4096, 25088, k, p) + sfb_numbers(4096, 4096, k, p) +
                        sfb_numbers(21841, 4096, k, p);
  EXPECT_EQ(plan["total"]["hybrid"]["numbers"].get<double>(), hybrid);
  EXPECT_EQ(plan["total"]["all_ps"]["numbers"].get<double>(), ps_numbers(229052817, p));
  EXPECT_EQ(plan["total"]["hybrid"]["bytes"].get<double>(), 4 * hybrid);
}

TEST(PlanCli, SfbUpToTheBreakEvenWorkerCount) {
  // fc7-like layer alone, latency and rebuild cost out of the way: bytes decide.
  TempDir dir;
  const std::string model = dir.write("fc.yaml", R"(name: fc
inputs: {data: [4096], label: []}
layers:
  - {name: fc7, type: fc, inputs: data, num_output: 4096}
  - {name: loss, type: softmax_loss, inputs: [fc7, label]}
)");
  // SFB moves no more than PS while 2K(P-1)(M+N) <= 4S(P-1)/P with S = M*N + M:
  // P <= 2 * 16781312 / (32 * 8192) = 128.03.
  for (int workers : {2, 128, 129, 256}) {
    nlohmann::json plan =
        plan_json(model + " --workers " + std::to_string(workers) + " --batch 32 --latency 0 --gflops 1e12");
    ASSERT_FALSE(plan.is_null());
    EXPECT_EQ(plan["layers"][0]["scheme"], workers <= 128 ? "sfb" : "ps") << workers << " workers";
  }
}

// A training config with no dist section: the planner chooses the
// collective options by the rank count (at 64 ranks, the large-cluster ones;
// up to 32 the small-cluster ones: tests/dist/planner_choice_test.cpp) and
// says so; dist.compression auto
// shows each layer's wire and rank.
TEST(PlanCli, NoDistKeyChoosesByRankCountAndShowsTheCompressionChoice) {
  const std::string config = std::string(POSEIDON_SOURCE_DIR) + "/configs/vgg19_22k_synthetic.yaml";
  const nlohmann::json large = plan_json(config + " --workers 64 --bandwidth 25 --gflops 20000");
  ASSERT_FALSE(large.is_null());
  const std::string large_text = large["collective"];
  EXPECT_EQ(large_text.rfind("all-reduce auto, fused buckets", 0), 0u) << large_text;
  EXPECT_NE(large_text.find("spread PS blocks (chosen for 64 ranks)"), std::string::npos) << large_text;
  EXPECT_EQ(large["compression"], "off");
  const nlohmann::json automatic =
      plan_json(config + " --workers 512 --bandwidth 25 --gflops 20000 --set dist.compression=auto");
  ASSERT_FALSE(automatic.is_null());
  EXPECT_EQ(automatic["compression"], "auto");
  int lowrank = 0;
  for (const auto& l : automatic["layers"])
    if (l["scheme"] == "lowrank") {
      ++lowrank;
      EXPECT_GE(l["rank"].get<int>(), 4) << l["name"];
    }
  EXPECT_GT(lowrank, 0);
}

}  // namespace
}  // namespace poseidon::testing
