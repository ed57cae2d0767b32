// ConfigNode: typed, located access to a YAML tree. Every error it raises names
// the file, line, column and key path, what was expected and what was found.
// Unknown keys are errors: check_keys() lists the allowed ones.
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

  // Parses a YAML file; syntax errors and missing files become ConfigError.
  static ConfigNode load_file(const std::string& file);
  static ConfigNode parse(const std::string& text, const std::string& name);

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

  YAML::Node node_;
  std::string file_;
  std::string path_;
};

// Applies one "a.b.c=value" override to a YAML tree (value parsed as YAML).
// Sequence elements are addressed by index ("layers.2.num_output") or, for a
// sequence of maps with a `name`, by that name ("layers.fc2.num_output").
void apply_override(YAML::Node root, const std::string& assignment);

}  // namespace poseidon
