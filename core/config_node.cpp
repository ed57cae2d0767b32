// Located, typed YAML access and command-line overrides.
#include "core/config_node.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/duplicate_keys.h"
#include "core/paths.h"
#include "core/suggest.h"

namespace poseidon {

ConfigNode::ConfigNode(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

ConfigNode ConfigNode::load_file(const std::string& file) {
  if (const std::string why = why_not_a_file(file); !why.empty()) throw ConfigError({file, 0, 0, ""}, why);
  std::ifstream in(file);
  if (!in) throw ConfigError({file, 0, 0, ""}, "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), file);
}

ConfigNode ConfigNode::parse(const std::string& text, const std::string& name) {
  try {
    YAML::Node root = YAML::Load(text);
    check_duplicate_keys(text, name);
    if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
    return ConfigNode(root, name, "");
  } catch (const YAML::Exception& e) {
    throw ConfigError({name, e.mark.line + 1, e.mark.column + 1, ""},
                      "YAML syntax error: " + e.msg);
  }
}

void ConfigNode::apply_overrides(const std::vector<std::string>& assignments, const std::string& shown_prefix) {
  auto all = std::make_shared<std::vector<Override>>();
  if (overrides_) *all = *overrides_;
  for (const std::string& a : assignments)
    all->push_back({apply_override(node_, a, shown_prefix), "--set " + shown_prefix + a});
  overrides_ = std::move(all);
}

ConfigNode ConfigNode::derived(const YAML::Node& node, std::string path) const {
  ConfigNode c(node, file_, std::move(path));
  c.overrides_ = overrides_;
  c.override_ = override_;
  if (c.override_.empty() && overrides_)
    for (const Override& o : *overrides_)
      if (o.value.is(node)) c.override_ = o.shown;
  return c;
}

SourceLocation ConfigNode::location_of(const YAML::Node& mark_node, const std::string& path) const {
  if (!override_.empty()) return {override_, 0, 0, path};
  YAML::Mark m = mark_node.Mark();
  if (m.line < 0) return {file_, 0, 0, path};
  return {file_, m.line + 1, m.column + 1, path};
}

std::string ConfigNode::key_name(const YAML::Node& key) const {
  if (key.IsScalar()) return key.Scalar();
  throw ConfigError(location_of(key, path_), "a key must be a plain name, not a list or map");
}

std::string ConfigNode::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

SourceLocation ConfigNode::location() const { return location_of(node_, path_); }

void ConfigNode::fail(const std::string& what) const { throw ConfigError(location(), what); }

std::string ConfigNode::found() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsScalar()) return "'" + node_.Scalar() + "'";
  if (node_.IsSequence()) return "a list";
  return "a map";
}

bool ConfigNode::has(const std::string& key) const {
  return node_.IsMap() && node_[key].IsDefined();
}

std::optional<ConfigNode> ConfigNode::find(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return derived(node_[key], key_path(key));
}

ConfigNode ConfigNode::child(const std::string& key) const {
  if (!node_.IsMap()) fail("expected a map with key '" + key + "', found " + found());
  if (!has(key)) {
    SourceLocation where = location();
    where.key = key_path(key);
    throw ConfigError(where, "missing required key '" + key + "'");
  }
  return derived(node_[key], key_path(key));
}

size_t ConfigNode::size() const {
  if (!node_.IsSequence()) fail("expected a list, found " + found());
  return node_.size();
}

ConfigNode ConfigNode::at(size_t i) const {
  if (!node_.IsSequence()) fail("expected a list, found " + found());
  // A layer is named by its name, as --set addresses it ("layers.fc2"), not by its position.
  const YAML::Node element = node_[i];
  if (element.IsMap() && element["name"] && element["name"].IsScalar()) {
    const std::string name = element["name"].Scalar();
    if (!name.empty() && name.find('$') == std::string::npos) return derived(element, key_path(name));
  }
  return derived(element, path_ + "[" + std::to_string(i) + "]");
}

std::vector<std::string> ConfigNode::keys() const {
  std::vector<std::string> out;
  if (!node_.IsMap()) return out;
  for (auto it = node_.begin(); it != node_.end(); ++it) out.push_back(key_name(it->first));
  return out;
}

int64_t ConfigNode::as_int() const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end && *end == '\0' && errno == 0) return v;
    // Accept integral floats written as 1e3.
    double d = std::strtod(s.c_str(), &end);
    // (within int64's range first: converting a larger double is undefined)
    if (!s.empty() && end && *end == '\0' && std::fabs(d) < 9.2e18 && d == std::trunc(d))
      return static_cast<int64_t>(d);
  }
  fail("expected an integer, found " + found());
}

double ConfigNode::as_double() const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return v;
  }
  fail("expected a number, found " + found());
}

bool ConfigNode::as_bool() const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    if (s == "true" || s == "True" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "False" || s == "no" || s == "off") return false;
  }
  fail("expected true or false, found " + found());
}

std::string ConfigNode::as_string() const {
  if (node_.IsScalar()) return node_.Scalar();
  fail("expected a string, found " + found());
}

std::vector<int64_t> ConfigNode::as_int_list() const {
  if (node_.IsScalar()) return {as_int()};
  std::vector<int64_t> out;
  for (size_t i = 0; i < size(); ++i) out.push_back(at(i).as_int());
  return out;
}

std::vector<std::string> ConfigNode::as_string_list() const {
  if (node_.IsScalar()) return {as_string()};
  std::vector<std::string> out;
  for (size_t i = 0; i < size(); ++i) out.push_back(at(i).as_string());
  return out;
}

int64_t ConfigNode::get_int(const std::string& key, int64_t def) const {
  return has(key) ? child(key).as_int() : def;
}
double ConfigNode::get_double(const std::string& key, double def) const {
  return has(key) ? child(key).as_double() : def;
}
bool ConfigNode::get_bool(const std::string& key, bool def) const {
  return has(key) ? child(key).as_bool() : def;
}
std::string ConfigNode::get_string(const std::string& key, const std::string& def) const {
  return has(key) ? child(key).as_string() : def;
}

std::string ConfigNode::get_choice(const std::string& key, const std::vector<std::string>& choices,
                                   const std::string& def) const {
  if (!has(key)) return def;
  ConfigNode c = child(key);
  std::string v = c.as_string();
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (const auto& s : choices) list += (list.empty() ? "" : ", ") + s;
  c.fail("expected one of " + list + ", found '" + v + "'" + did_you_mean(v, choices));
}

void ConfigNode::check_keys(const std::vector<std::string>& allowed) const {
  if (!node_.IsMap()) fail("expected a map, found " + found());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string k = key_name(it->first);
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string list;
    for (const auto& s : allowed) list += (list.empty() ? "" : ", ") + s;
    throw ConfigError(derived(it->second, key_path(k)).location_of(it->first, key_path(k)),
                      "unknown key '" + k + "'" + did_you_mean(k, allowed) + " (allowed: " + list + ")");
  }
}

YAML::Node apply_override(YAML::Node root, const std::string& assignment, const std::string& shown_prefix) {
  const std::string shown = "--set " + shown_prefix + assignment;
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw ConfigError({shown, 0, 0, ""}, "expected key=value");
  std::string path = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
    check_duplicate_keys(assignment.substr(eq + 1), shown);
  } catch (const YAML::Exception& e) {
    throw ConfigError({shown, 0, 0, shown_prefix + path}, "cannot parse value: " + e.msg);
  }
  std::vector<std::string> parts;
  std::stringstream ss(path);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  // "key=null" (or ~) removes the key: the file's value and its default are
  // then as if never written (switching solver.type drops the old type's keys).
  const std::string text = assignment.substr(eq + 1);
  const bool removes = value.IsNull() && (text == "null" || text == "Null" || text == "NULL" || text == "~");

  YAML::Node cur = root;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    bool last = i + 1 == parts.size();
    YAML::Node next;
    bool found = false;
    if (cur.IsSequence()) {
      bool is_index = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
      if (is_index && std::stoul(part) < cur.size()) {
        next.reset(cur[std::stoul(part)]);
        found = true;
      } else {
        for (size_t k = 0; k < cur.size(); ++k) {
          YAML::Node el = cur[k];
          if (el.IsMap() && el["name"] && el["name"].Scalar() == part) {
            next.reset(el);
            found = true;
          }
        }
      }
      if (!found) {
        std::vector<std::string> names;
        for (size_t k = 0; k < cur.size(); ++k)
          if (cur[k].IsMap() && cur[k]["name"] && cur[k]["name"].IsScalar()) names.push_back(cur[k]["name"].Scalar());
        throw ConfigError({shown, 0, 0, shown_prefix + path}, "no list element '" + part + "'" + did_you_mean(part, names));
      }
      if (last) throw ConfigError({shown, 0, 0, shown_prefix + path}, "cannot replace a whole list element");
    } else {
      if (!cur.IsMap() && !cur.IsNull())
        throw ConfigError({shown, 0, 0, shown_prefix + path}, "'" + part + "' is inside a scalar");
      if (removes && !(cur.IsMap() && static_cast<const YAML::Node&>(cur)[part])) {
        std::vector<std::string> keys;
        if (cur.IsMap())
          for (auto it = cur.begin(); it != cur.end(); ++it) keys.push_back(it->first.as<std::string>(""));
        throw ConfigError({shown, 0, 0, shown_prefix + path},
                          "no key '" + part + "' to remove" + did_you_mean(part, keys));
      }
      if (last) {
        if (removes) {
          cur.remove(part);
          return value;
        }
        cur[part] = value;
        return value;
      }
      if (!cur[part].IsDefined() || cur[part].IsNull()) cur[part] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[part]);
    }
    cur.reset(next);
  }
  return value;
}

}  // namespace poseidon
