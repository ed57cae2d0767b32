// ConfigNode's typed reads at their edges: integers written as floats, values
// beyond int64, and keys that are not plain names (found by fuzzing) are
// ConfigErrors that name the file and line, never undefined behaviour. Key
// paths name a layer by its name; unknown names suggest the one meant.
#include "core/config_node.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/suggest.h"

namespace poseidon {
namespace {

int64_t read_int(const std::string& text) { return ConfigNode::parse("n: " + text + "\n", "c.yaml").get_int("n"); }

std::string int_error(const std::string& text) {
  try {
    read_int(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigNodeInt, AcceptsIntegersAndIntegralFloats) {
  EXPECT_EQ(read_int("42"), 42);
  EXPECT_EQ(read_int("-7"), -7);
  EXPECT_EQ(read_int("1e3"), 1000);
  EXPECT_EQ(read_int("9223372036854775807"), INT64_MAX);
}

TEST(ConfigNodeInt, RejectsFractionsAndValuesBeyondInt64) {
  for (const char* bad : {"1.5", "1e62", "-1e19", "1e400", "nan", "inf", "abc"}) {
    const std::string message = int_error(bad);
    EXPECT_NE(message.find("c.yaml:1"), std::string::npos) << bad << ": " << message;
    EXPECT_NE(message.find("expected an integer"), std::string::npos) << bad << ": " << message;
  }
}

TEST(ConfigNodeKeys, KeyThatIsAListIsALocatedError) {
  ConfigNode root = ConfigNode::parse("a: 1\n[b, c]: 2\n", "k.yaml");
  try {
    root.check_keys({"a"});
    FAIL() << "accepted a list as a key";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("k.yaml:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("plain name"), std::string::npos) << e.what();
  }
  EXPECT_THROW(root.keys(), ConfigError);
}

TEST(ConfigNodePaths, ListElementsWithANameAreNamedByIt) {
  ConfigNode root = ConfigNode::parse("layers:\n  - {name: fc2, type: fc}\n  - {type: relu}\n  - 3\n", "m.yaml");
  ConfigNode layers = root.child("layers");
  EXPECT_EQ(layers.at(0).child("type").path(), "layers.fc2.type");
  EXPECT_EQ(layers.at(1).path(), "layers[1]");
  EXPECT_EQ(layers.at(2).path(), "layers[2]");
}

std::string config_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigNodeKeys, UnknownKeysAndChoicesSuggestTheNearest) {
  ConfigNode c = ConfigNode::parse("solver: {lrr: 0.1, lr_policy: stepp}\n", "c.yaml");
  EXPECT_NE(config_error([&] {
              c.child("solver").check_keys({"type", "lr", "lr_policy", "momentum"});
            }).find("unknown key 'lrr'; did you mean 'lr'? (allowed: type, lr, lr_policy, momentum)"),
            std::string::npos);
  EXPECT_NE(config_error([&] {
              c.child("solver").get_choice("lr_policy", {"fixed", "step", "poly"}, "fixed");
            }).find("found 'stepp'; did you mean 'step'?"),
            std::string::npos);
  // Nothing near: no suggestion.
  EXPECT_EQ(config_error([&] {
              c.child("solver").check_keys({"type", "momentum", "lr_policy"});
            }).find("did you mean"),
            std::string::npos);
}

TEST(ConfigNodeOverride, AMissingListElementSuggestsTheNearestName) {
  ConfigNode root = ConfigNode::parse("layers:\n  - {name: fc1}\n  - {name: fc2}\n", "m.yaml");
  EXPECT_NE(config_error([&] {
              apply_override(root.yaml(), "layers.fc22.num_output=3");
            }).find("no list element 'fc22'; did you mean 'fc2'?"),
            std::string::npos);
}

TEST(Suggest, EditDistanceCountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(edit_distance("lrr", "lr"), 1u);
  EXPECT_EQ(edit_distance("kernel_sise", "kernel_size"), 1u);
  EXPECT_EQ(edit_distance("mometnum", "momentum"), 1u);  // two neighbours swapped
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("conv", "conv"), 0u);
  EXPECT_EQ(edit_distance("relu", "pool"), 4u);
}

TEST(Suggest, ClosestNameIsNearEnoughOrNothing) {
  const std::vector<std::string> types = {"accuracy", "conv", "fc", "pool", "relu", "softmax_loss"};
  EXPECT_EQ(closest_name("convv", types), "conv");
  EXPECT_EQ(closest_name("ReLU", types), "relu");  // case does not count
  EXPECT_EQ(closest_name("softmax_los", types), "softmax_loss");
  EXPECT_EQ(closest_name("fully_connected", types), "");
  EXPECT_EQ(closest_name("xyz", types), "");
  EXPECT_EQ(did_you_mean("pol", types), "; did you mean 'pool'?");
  EXPECT_EQ(did_you_mean("batchnorm", types), "");
}

}  // namespace
}  // namespace poseidon
