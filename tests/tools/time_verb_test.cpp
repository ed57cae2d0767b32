// `poseidon time --json`: one entry per layer in the model's order, and
// totals that are the sums of their parts (forward, zeroing the gradients,
// backward, the finite check and the update make the iteration), so that
// benchmark scripts can trust what they read.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tools/cli_runner.h"

namespace poseidon::testing {

const std::string kRoot = POSEIDON_SOURCE_DIR;

TEST(TimeVerb, JsonHasEveryLayerAndConsistentTotals) {
  CliResult r = run_poseidon("time " + kRoot + "/models/lenet.yaml --batch 4 --iters 2 --warmup 1 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json t = nlohmann::json::parse(r.out);
  EXPECT_EQ(t.at("model"), "lenet");
  EXPECT_EQ(t.at("batch"), 4);
  EXPECT_EQ(t.at("iters"), 2);

  CliResult summary = run_poseidon("summary " + kRoot + "/models/lenet.yaml --json");
  ASSERT_EQ(summary.status, 0) << summary.err;
  const nlohmann::json s = nlohmann::json::parse(summary.out);
  ASSERT_EQ(t.at("layers").size(), s.at("layers").size());
  double forward = 0, backward = 0;
  for (size_t i = 0; i < t.at("layers").size(); ++i) {
    const nlohmann::json& layer = t.at("layers")[i];
    EXPECT_EQ(layer.at("name"), s.at("layers")[i].at("name"));
    EXPECT_GE(layer.at("forward_ms").get<double>(), 0.0);
    EXPECT_GE(layer.at("backward_ms").get<double>(), 0.0);
    forward += layer.at("forward_ms").get<double>();
    backward += layer.at("backward_ms").get<double>();
  }
  EXPECT_NEAR(t.at("forward_ms").get<double>(), forward, 1e-9 * (1 + forward));
  EXPECT_NEAR(t.at("backward_ms").get<double>(), backward, 1e-9 * (1 + backward));
  const double check = t.at("check_finite_ms"), update = t.at("update_ms"), iteration = t.at("iteration_ms");
  const double zero = t.at("zero_grads_ms");
  EXPECT_GT(check, 0.0);
  EXPECT_GT(update, 0.0);
  EXPECT_GT(zero, 0.0);  // LeNet's fc layers add into their inputs' gradients: those are zeroed
  EXPECT_NEAR(iteration, forward + zero + backward + check + update, 1e-9 * iteration);
  EXPECT_NEAR(t.at("images_per_sec").get<double>(), 4 * 1000.0 / iteration, 1e-6 * t.at("images_per_sec").get<double>());
}

// Every ReLU of resnet_small follows a batch norm or a residual sum that
// takes it over (Net::fuse_relus): the table marks it fused, with no time of
// its own, and keeps every other layer as it was.
TEST(TimeVerb, FusedRelusAreMarkedAndTakeNoTime) {
  CliResult r =
      run_poseidon("time " + kRoot + "/models/resnet_small.yaml --batch 2 --iters 1 --warmup 0 --threads 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json t = nlohmann::json::parse(r.out);
  int relus = 0;
  for (const nlohmann::json& layer : t.at("layers")) {
    const bool relu = layer.at("type") == "relu";
    relus += relu;
    EXPECT_EQ(layer.at("fused").get<bool>(), relu) << layer.at("name");
    if (relu) {
      EXPECT_EQ(layer.at("forward_ms").get<double>(), 0.0) << layer.at("name");
      EXPECT_EQ(layer.at("backward_ms").get<double>(), 0.0) << layer.at("name");
    }
  }
  EXPECT_EQ(relus, 1 + 6 * 2);  // the stem's, and two in each of six blocks
}

}  // namespace poseidon::testing
