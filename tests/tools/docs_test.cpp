// docs/CONFIG.md stays true: every registered layer type and each of its
// keys is documented there.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/registry.h"

namespace poseidon::testing {

TEST(Docs, ConfigReferenceListsEveryLayerAndKey) {
  std::ifstream in(std::string(POSEIDON_SOURCE_DIR) + "/docs/CONFIG.md");
  ASSERT_TRUE(in) << "docs/CONFIG.md missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  for (const LayerInfo* info : LayerRegistry::instance().all()) {
    size_t at = doc.find("### `" + info->type + "`");
    ASSERT_NE(at, std::string::npos) << "layer type '" << info->type << "' is not documented";
    size_t end = doc.find("### ", at + 4);
    std::string section = doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
    for (const KeyDoc& k : info->keys)
      EXPECT_NE(section.find("| `" + k.key + "` |"), std::string::npos)
          << "key '" << k.key << "' of '" << info->type << "' is not documented";
  }
}

}  // namespace poseidon::testing
