// Duplicate map keys in YAML text. YAML forbids them, but yaml-cpp accepts
// them and keeps the first value, so a config that sets a key twice would
// silently ignore the second setting. Checked on the parser's events, which
// see each alias once (a tree walk would follow aliases, possibly forever).
#pragma once

#include <string>

namespace poseidon {

// Throws a ConfigError at the second occurrence of a key, naming the first,
// when some map of the first YAML document in `text` (read from `file`)
// repeats a key.
void check_duplicate_keys(const std::string& text, const std::string& file);

}  // namespace poseidon
