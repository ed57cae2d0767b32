// Walks the layer registry: every registered type must have at least one
// finite-difference gradient case, and every case must pass.
#include <gtest/gtest.h>

#include <set>

#include "core/registry.h"
#include "layers/grad_check.h"

namespace poseidon::testing {

TEST(LayerRegistry, EveryTypeHasAGradientCheck) {
  std::set<std::string> covered;
  for (const auto& c : grad_cases()) {
    ConfigNode node = ConfigNode::parse(c.yaml, c.name);
    covered.insert(node.get_string("type"));
  }
  for (const auto* info : LayerRegistry::instance().all())
    EXPECT_TRUE(covered.count(info->type)) << "layer type '" << info->type << "' has no gradient check case";
}

class GradientCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientCheck, MatchesFiniteDifferences) {
  std::string failure = check_gradients(GetParam());
  EXPECT_TRUE(failure.empty()) << GetParam().name << ":\n" << failure;
}

INSTANTIATE_TEST_SUITE_P(AllLayers, GradientCheck, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace poseidon::testing
