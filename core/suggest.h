// "Did you mean": the closest of the names a config could have used, for
// messages about an unknown key, layer type, blob, block or variable. A
// misspelling is usually one or two edits away from what was meant.
#pragma once

#include <string>
#include <vector>

namespace poseidon {

// Edits (insert, delete, substitute, swap two neighbours) between a and b.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word` when it is near enough to be a likely
// misspelling (at most a third of the word's length in edits, at least one;
// letter case ignored), else "". Ties go to the earliest candidate.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

// "; did you mean 'lr'?" for closest_name's answer, or "" when there is none.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace poseidon
