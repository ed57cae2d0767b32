// ConfigNode: typed, located access to a YAML tree. Every error it raises names
// the file, line, column and key path, what was expected and what was found.
// Unknown keys are errors: check_keys() lists the allowed ones, and a key
// written twice in one map is an error at load (YAML parsers keep the first
// silently). Values set from the command line (apply_overrides) are reported
// at their override ("--set solver.lr=abc"), not at a line of the file.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace poseidon {

class ConfigNode {
 public:
  ConfigNode() = default;
  ConfigNode(YAML::Node node, std::string file, std::string path);

  // Parses a YAML file; syntax errors, duplicate keys, missing files and
  // directories become ConfigError.
  static ConfigNode load_file(const std::string& file);
  static ConfigNode parse(const std::string& text, const std::string& name);

  // Applies "a.b.c=value" overrides (apply_override) to this tree; later
  // errors about their values name "--set <shown_prefix><assignment>".
  void apply_overrides(const std::vector<std::string>& assignments, const std::string& shown_prefix = "");

  // A tree made from this one (model blocks expanded), read from the same
  // file: values kept from overrides are still reported at them.
  ConfigNode rebuilt(YAML::Node tree) const { return derived(tree, path_); }

  const YAML::Node& yaml() const { return node_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }

  bool has(const std::string& key) const;
  ConfigNode child(const std::string& key) const;  // error if missing
  std::optional<ConfigNode> find(const std::string& key) const;
  size_t size() const;                             // sequence length
  // Sequence element; its key path names a map element with a `name` by that
  // name ("layers.fc2"), any other by position ("milestones[1]").
  ConfigNode at(size_t i) const;
  std::vector<std::string> keys() const;

  int64_t as_int() const;
  double as_double() const;
  bool as_bool() const;
  std::string as_string() const;
  std::vector<int64_t> as_int_list() const;        // a scalar or a sequence of ints
  std::vector<std::string> as_string_list() const; // a scalar or a sequence of strings

  int64_t get_int(const std::string& key) const { return child(key).as_int(); }
  int64_t get_int(const std::string& key, int64_t def) const;
  double get_double(const std::string& key) const { return child(key).as_double(); }
  double get_double(const std::string& key, double def) const;
  bool get_bool(const std::string& key, bool def) const;
  std::string get_string(const std::string& key) const { return child(key).as_string(); }
  std::string get_string(const std::string& key, const std::string& def) const;
  // The value must be one of `choices`.
  std::string get_choice(const std::string& key, const std::vector<std::string>& choices,
                         const std::string& def) const;

  // Rejects keys not in `allowed` (the message lists the allowed ones).
  void check_keys(const std::vector<std::string>& allowed) const;

  SourceLocation location() const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::string key_path(const std::string& key) const;
  // A map key's text; a key that is a list or a map is a ConfigError at it.
  std::string key_name(const YAML::Node& key) const;
  std::string found() const;  // a short rendering of this node for messages
  // The child `node` at `path`, which knows the overrides this node knows.
  ConfigNode derived(const YAML::Node& node, std::string path) const;
  // Where `mark_node` (this node or one of its keys) is: its line in the file,
  // or the override this node's value came from.
  SourceLocation location_of(const YAML::Node& mark_node, const std::string& path) const;

  // A value set by an override, and the override as the user wrote it.
  struct Override {
    YAML::Node value;
    std::string shown;
  };

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<const std::vector<Override>> overrides_;
  std::string override_;  // the override this node's value comes from; empty for the file's own
};

// Applies one "a.b.c=value" override to a YAML tree (value parsed as YAML)
// and returns the value's node. Sequence elements are addressed by index
// ("layers.2.num_output") or, for a sequence of maps with a `name`, by that
// name ("layers.fc2.num_output"). Errors name "--set <shown_prefix><assignment>".
YAML::Node apply_override(YAML::Node root, const std::string& assignment, const std::string& shown_prefix = "");

}  // namespace poseidon
