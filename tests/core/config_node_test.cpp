// ConfigNode's typed reads at their edges: integers written as floats, values
// beyond int64, and keys that are not plain names (found by fuzzing) are
// ConfigErrors that name the file and line, never undefined behaviour.
#include <gtest/gtest.h>

#include "core/config_node.h"

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

}  // namespace
}  // namespace poseidon
