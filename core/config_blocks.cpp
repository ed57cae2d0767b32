// Expansion of model variables and parameterised blocks into plain layers.
#include "core/config_blocks.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "core/suggest.h"

namespace poseidon {

namespace {

using Env = std::map<std::string, YAML::Node>;  // variable name -> value node

// yaml-cpp cannot set a node's mark, but its parser records one: parsing a
// null placed at the same line and column gives a fresh node that carries it.
YAML::Node node_marked(const YAML::Mark& mark) {
  if (mark.line < 0 || mark.column < 0) return YAML::Node();
  return YAML::Load(std::string(mark.line, '\n') + std::string(mark.column, ' ') + "~");
}

YAML::Node scalar_marked(const YAML::Mark& mark, const std::string& text) {
  YAML::Node n = node_marked(mark);
  n = text;
  return n;
}

YAML::Node list_marked(const YAML::Mark& mark, const std::vector<std::string>& items) {
  YAML::Node n = node_marked(mark);
  for (const auto& s : items) n.push_back(s);
  if (items.empty()) n = YAML::Node(YAML::NodeType::Sequence);
  return n;
}

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool is_identifier(const std::string& s) {
  return !s.empty() && ident_start(s[0]) && std::all_of(s.begin(), s.end(), ident_char);
}

// "in", "in0", "in1", ...: an instance's inputs.
bool is_reserved(const std::string& name) {
  return name.rfind("in", 0) == 0 && std::all_of(name.begin() + 2, name.end(), ::isdigit);
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The variable of a whole-scalar reference ("$name" or "${name}"), if it is one.
std::optional<std::string> whole_reference(const std::string& s) {
  if (s.size() > 1 && s[0] == '$' && is_identifier(s.substr(1))) return s.substr(1);
  if (s.size() > 3 && s.rfind("${", 0) == 0 && s.back() == '}' && is_identifier(trim(s.substr(2, s.size() - 3))))
    return trim(s.substr(2, s.size() - 3));
  return std::nullopt;
}

// Names referenced by `$name` or inside `${...}` in one scalar.
void collect_in_text(const std::string& s, std::set<std::string>& out) {
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != '$') continue;
    const bool braced = s[i + 1] == '{';
    const size_t end = braced ? s.find('}', i) : s.size();
    if (end == std::string::npos) return;
    for (size_t k = braced ? i + 2 : i + 1; k < end;) {
      if (!ident_start(s[k])) {
        if (!braced) break;
        ++k;
        continue;
      }
      size_t e = k;
      while (e < end && ident_char(s[e])) ++e;
      out.insert(s.substr(k, e - k));
      k = e;
      if (!braced) break;
    }
    if (braced) i = end;
  }
}

void collect_references(const YAML::Node& node, std::set<std::string>& out) {
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) collect_references(it->second, out);
  } else if (node.IsSequence()) {
    for (const auto& el : node) collect_references(el, out);
  } else if (node.IsScalar()) {
    collect_in_text(node.Scalar(), out);
  }
}

std::optional<int64_t> integer_of(const YAML::Node& node) {
  if (!node.IsScalar()) return std::nullopt;
  const std::string& s = node.Scalar();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0) return std::nullopt;
  return v;
}

// Integer arithmetic of `${...}`: + - * and parentheses over integers and variables.
class Arithmetic {
 public:
  Arithmetic(const std::string& text, const ConfigNode& where, const Env& env) : s_(text), where_(where), env_(env) {}

  int64_t evaluate() {
    int64_t v = sum();
    skip_spaces();
    if (pos_ != s_.size()) fail("unexpected '" + s_.substr(pos_, 1) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    where_.fail("cannot evaluate '${" + s_ + "}': " + what +
                " (expressions are integer arithmetic: + - * and parentheses over integers and variables)");
  }
  void skip_spaces() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool take(char c) {
    skip_spaces();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  int64_t sum() {
    int64_t v = product();
    for (;;) {
      if (take('+'))
        v += product();
      else if (take('-'))
        v -= product();
      else
        return v;
    }
  }
  int64_t product() {
    int64_t v = unary();
    while (take('*')) v *= unary();
    return v;
  }
  int64_t unary() {
    if (take('-')) return -unary();
    if (take('(')) {
      int64_t v = sum();
      if (!take(')')) fail("missing ')'");
      return v;
    }
    skip_spaces();
    size_t start = pos_;
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      return std::stoll(s_.substr(start, pos_ - start));
    }
    if (pos_ < s_.size() && ident_start(s_[pos_])) {
      while (pos_ < s_.size() && ident_char(s_[pos_])) ++pos_;
      std::string name = s_.substr(start, pos_ - start);
      auto it = env_.find(name);
      if (it == env_.end()) {
        std::vector<std::string> known;
        for (const auto& [k, v] : env_) known.push_back(k);
        fail("unknown variable '" + name + "'" + did_you_mean(name, known));
      }
      auto v = integer_of(it->second);
      if (!v) fail("variable '" + name + "' is not an integer");
      return *v;
    }
    fail(pos_ < s_.size() ? "unexpected '" + s_.substr(pos_, 1) + "'" : "unexpected end");
  }

  const std::string& s_;
  const ConfigNode& where_;
  const Env& env_;
  size_t pos_ = 0;
};

class Expander {
 public:
  explicit Expander(const ConfigNode& model) : model_(model) {}
  const std::map<std::string, std::string>& switches() const { return switches_; }

  ConfigNode run() {
    if (!model_.is_map()) return model_;
    if (auto vars = model_.find("vars")) read_vars(*vars);
    if (auto blocks = model_.find("blocks")) read_blocks(*blocks);

    YAML::Node root = node_marked(model_.yaml().Mark());
    for (auto it = model_.yaml().begin(); it != model_.yaml().end(); ++it) {
      const std::string key = it->first.Scalar();
      ConfigNode value = model_.child(key);
      if (key == "vars" || key == "blocks") continue;
      if (key == "inputs") {
        root[it->first] = substitute(value, vars_);
      } else if (key == "layers" && value.is_sequence()) {
        const YAML::Node& inputs = model_.yaml()["inputs"];
        std::vector<std::string> first_input;
        if (inputs.IsDefined() && inputs.IsMap() && inputs.size() > 0) first_input = {inputs.begin()->first.Scalar()};
        Scope top("", &vars_, true, "", first_input);
        layers_ = node_marked(value.yaml().Mark());  // stays null, for the Net to reject, if nothing is kept
        expand_list(value, top);
        root[it->first] = layers_;
      } else {
        root[it->first] = it->second;
      }
    }
    check_vars_used();
    return model_.rebuilt(root);
  }

 private:
  struct Scope {
    Scope(std::string prefix, const Env* env, bool top, std::string block, std::vector<std::string> previous)
        : prefix(std::move(prefix)), env(env), top(top), block(std::move(block)), previous(std::move(previous)) {}

    std::string prefix;  // prepended to every layer name: "Mixed_5b." inside that instance
    const Env* env;
    bool top;                                               // literal input names may name any blob of the net
    std::string block;                                      // the block being expanded; empty at the top
    std::map<std::string, std::vector<std::string>> blobs;  // local name -> global blob names
    std::set<std::string> pending;                          // names that must be defined before they are read
    std::vector<std::string> previous;                      // outputs of the last item: the default inputs
    std::string switch_var;  // the model variable whose `if` keeps this scope's layers ("" : none)
  };

  void read_vars(const ConfigNode& vars) {
    if (!vars.is_map()) vars.fail("expected a map of variable names to values, e.g. {num_classes: 1000}");
    for (const std::string& name : vars.keys()) {
      ConfigNode value = vars.child(name);
      if (!is_identifier(name) || is_reserved(name))
        value.fail("'" + name + "' cannot be a variable name (letters, digits and _; in, in0, in1, ... are reserved)");
      vars_[name] = substitute(value, vars_);
    }
  }

  void read_blocks(const ConfigNode& blocks) {
    if (!blocks.is_map()) blocks.fail("expected a map of block names to definitions");
    for (const std::string& name : blocks.keys()) {
      ConfigNode def = blocks.child(name);
      def.check_keys({"description", "args", "layers", "output"});
      if (auto args = def.find("args")) {
        if (!args->is_map()) args->fail("expected a map of argument names to defaults (null: required)");
        for (const std::string& arg : args->keys())
          if (!is_identifier(arg) || is_reserved(arg))
            args->child(arg).fail(
                "'" + arg + "' cannot be an argument name (letters, digits and _; in, in0, in1, ... are reserved)");
      }
      ConfigNode layers = def.child("layers");
      if (!layers.is_sequence() || layers.size() == 0) layers.fail("expected a non-empty list of layers");
      blocks_.emplace(name, def);
    }
  }

  // A variable nobody reads is most likely a misspelt override.
  void check_vars_used() const {
    if (!model_.has("vars")) return;
    std::set<std::string> used;
    for (const char* key : {"vars", "blocks", "inputs", "layers"})
      if (model_.has(key)) collect_references(model_.yaml()[key], used);
    const YAML::Node& vars = model_.yaml()["vars"];
    for (auto it = vars.begin(); it != vars.end(); ++it) {
      const std::string name = it->first.Scalar();
      if (used.count(name)) continue;
      YAML::Mark m = it->first.Mark();
      const std::vector<std::string> names = model_.child("vars").keys();
      throw ConfigError({model_.file(), m.line + 1, m.column + 1, "vars." + name},
                        "variable '" + name + "' is not used by the model" + did_you_mean(name, names) +
                            " (variables: " + join(names) + ")");
    }
  }

  const YAML::Node& lookup(const std::string& name, const ConfigNode& where, const Env& env) const {
    auto it = env.find(name);
    if (it != env.end()) return it->second;
    std::vector<std::string> known;
    for (const auto& [k, v] : env) known.push_back(k);
    where.fail("unknown variable '$" + name + "'" + did_you_mean(name, known) + " (" +
               (known.empty() ? "none defined" : "known: " + join(known)) + ")");
  }

  // The text of a scalar with every `$name` and `${expr}` replaced.
  std::string interpolate(const ConfigNode& node, const Env& env) const {
    const std::string& s = node.yaml().Scalar();
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '$') {
        out += s[i];
        continue;
      }
      if (i + 1 < s.size() && s[i + 1] == '{') {
        size_t end = s.find('}', i);
        if (end == std::string::npos) node.fail("'${' without a closing '}' in '" + s + "'");
        std::string expr = s.substr(i + 2, end - i - 2);
        if (is_identifier(trim(expr))) {
          out += scalar_text(trim(expr), node, env);
        } else {
          out += std::to_string(Arithmetic(expr, node, env).evaluate());
        }
        i = end;
      } else if (i + 1 < s.size() && ident_start(s[i + 1])) {
        size_t end = i + 1;
        while (end < s.size() && ident_char(s[end])) ++end;
        out += scalar_text(s.substr(i + 1, end - i - 1), node, env);
        i = end - 1;
      } else {
        node.fail("a '$' starts a variable reference ($name or ${expression}), found '" + s + "'");
      }
    }
    return out;
  }

  std::string scalar_text(const std::string& name, const ConfigNode& where, const Env& env) const {
    const YAML::Node& v = lookup(name, where, env);
    if (!v.IsScalar())
      where.fail("variable '" + name + "' is a list or map; only a whole value '$" + name + "' can use it");
    return v.Scalar();
  }

  // A copy of `node` with variables substituted. Unchanged scalars and
  // whole-scalar references share nodes with the source (and so its marks).
  YAML::Node substitute(const ConfigNode& node, const Env& env) const {
    const YAML::Node& y = node.yaml();
    if (y.IsScalar()) {
      const std::string& s = y.Scalar();
      if (s.find('$') == std::string::npos) return y;
      if (auto name = whole_reference(s)) return lookup(*name, node, env);
      return scalar_marked(y.Mark(), interpolate(node, env));
    }
    if (y.size() == 0) return y;  // null, [] or {}
    YAML::Node out = node_marked(y.Mark());
    if (y.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) out.push_back(substitute(node.at(i), env));
    } else {
      for (auto it = y.begin(); it != y.end(); ++it) out[it->first] = substitute(node.child(it->first.Scalar()), env);
    }
    return out;
  }

  std::string substitute_string(const ConfigNode& node, const Env& env) const {
    return ConfigNode(substitute(node, env), node.file(), node.path()).as_string();
  }

  void expand_list(const ConfigNode& list, Scope& scope) {
    for (size_t i = 0; i < list.size(); ++i) {
      ConfigNode item = list.at(i);
      if (!item.is_map()) continue;
      // At the top, layers may come in any order; instances and switchable
      // layers have no blob of their own, so they must come before their readers.
      if (!scope.top || item.has("block") || item.has("if"))
        if (item.has("name")) scope.pending.insert(substitute_string(item.child("name"), *scope.env));
    }
    for (size_t i = 0; i < list.size(); ++i) expand_item(list.at(i), scope);
  }

  void expand_item(const ConfigNode& item, Scope& scope) {
    if (!item.is_map()) item.fail("expected a layer or a block instance (a map)");
    const bool instance = item.has("block");
    std::string local;
    if (item.has("name") || !instance) local = substitute_string(item.child("name"), *scope.env);
    if (!local.empty() && scope.blobs.count(local))
      item.child("name").fail("duplicate layer name '" + local + "'" +
                              (scope.block.empty() ? "" : " in block '" + scope.block + "'"));
    std::vector<std::string> inputs = item.has("inputs") ? resolve_inputs(item.child("inputs"), scope) : scope.previous;

    std::vector<std::string> outputs;
    bool enabled = !item.has("if") ||
                   ConfigNode(substitute(item.child("if"), *scope.env), item.file(), item.child("if").path()).as_bool();
    const std::string switch_var = item.has("if") ? model_switch(item.child("if"), scope) : scope.switch_var;
    if (!enabled) {
      if (instance) find_block(item.child("block"));
      outputs = inputs;
    } else if (instance) {
      outputs = expand_instance(item, local, inputs, scope, switch_var);
    } else {
      outputs = expand_layer(item, local, inputs, scope, switch_var);
    }
    scope.previous = outputs;
    if (local.empty()) return;
    scope.pending.erase(local);
    if (!enabled || instance || !item.has("outputs")) {
      scope.blobs[local] = outputs;
      return;
    }
    std::vector<std::string> named =
        ConfigNode(substitute(item.child("outputs"), *scope.env), item.file(), "").as_string_list();
    for (size_t k = 0; k < named.size(); ++k) scope.blobs[named[k]] = {outputs[k]};
  }

  // The model variable an `if` reads as a whole ("if: $aux"), unless a block argument shadows it.
  std::string model_switch(const ConfigNode& condition, const Scope& scope) const {
    if (!condition.is_scalar()) return scope.switch_var;
    const auto name = whole_reference(condition.yaml().Scalar());
    if (!name || !vars_.count(*name) || !scope.env->count(*name) || !scope.env->at(*name).is(vars_.at(*name)))
      return scope.switch_var;
    return *name;
  }

  std::vector<std::string> resolve_inputs(const ConfigNode& node, const Scope& scope) const {
    std::vector<ConfigNode> names;
    if (node.is_sequence()) {
      for (size_t i = 0; i < node.size(); ++i) names.push_back(node.at(i));
    } else {
      names.push_back(node);
    }
    std::vector<std::string> out;
    for (const ConfigNode& n : names) {
      if (!n.is_scalar()) n.fail("expected a blob name");
      const std::string& s = n.yaml().Scalar();
      if (auto var = whole_reference(s)) {
        // A variable holds names of the caller's scope, already resolved.
        const YAML::Node& v = lookup(*var, n, *scope.env);
        if (v.IsScalar()) {
          out.push_back(v.Scalar());
        } else {
          if (!v.IsSequence()) n.fail("variable '" + *var + "' holds no blob names");
          for (const auto& el : v) {
            if (!el.IsScalar()) n.fail("variable '" + *var + "' holds something other than blob names");
            out.push_back(el.Scalar());
          }
        }
        continue;
      }
      std::string name = s.find('$') == std::string::npos ? s : interpolate(n, *scope.env);
      auto it = scope.blobs.find(name);
      if (it != scope.blobs.end()) {
        if (it->second.size() != 1)
          n.fail("'" + name + "' stands for " + std::to_string(it->second.size()) +
                 " blobs here (a disabled layer with several inputs, or several outputs); name one blob");
        out.push_back(it->second.front());
      } else if (scope.pending.count(name)) {
        n.fail("'" + name + "' is defined after this layer; " +
               (scope.top ? "block instances and layers with `if` must come before the layers that read them"
                          : "inside a block, layers read only layers listed before them"));
      } else if (!scope.top) {
        n.fail("block '" + scope.block + "' has no layer '" + name +
               "' before this one (the instance's inputs are $in, or $in0, $in1, ...)");
      } else {
        out.push_back(name);
      }
    }
    return out;
  }

  std::vector<std::string> expand_layer(const ConfigNode& item, const std::string& local,
                                        const std::vector<std::string>& inputs, const Scope& scope,
                                        const std::string& switch_var) {
    YAML::Node layer = node_marked(item.yaml().Mark());
    std::vector<std::string> outputs = {scope.prefix + local};
    for (auto it = item.yaml().begin(); it != item.yaml().end(); ++it) {
      const std::string key = it->first.Scalar();
      ConfigNode value = item.child(key);
      if (key == "if") continue;
      if (key == "name") {
        layer[it->first] = scalar_marked(value.yaml().Mark(), scope.prefix + local);
      } else if (key == "inputs") {
        layer[it->first] = list_marked(value.yaml().Mark(), inputs);
      } else if (key == "outputs") {
        outputs = ConfigNode(substitute(value, *scope.env), item.file(), value.path()).as_string_list();
        for (auto& o : outputs) o = scope.prefix + o;
        layer[it->first] = list_marked(value.yaml().Mark(), outputs);
      } else {
        layer[it->first] = substitute(value, *scope.env);
      }
    }
    if (!item.has("inputs") && !inputs.empty()) layer["inputs"] = list_marked(item.yaml().Mark(), inputs);
    layers_.push_back(layer);
    if (!switch_var.empty()) switches_[scope.prefix + local] = switch_var;
    return outputs;
  }

  const ConfigNode& find_block(const ConfigNode& name_node) const {
    std::string name = name_node.as_string();
    auto it = blocks_.find(name);
    if (it != blocks_.end()) return it->second;
    std::vector<std::string> known;
    for (const auto& [k, v] : blocks_) known.push_back(k);
    name_node.fail("unknown block '" + name + "'" + did_you_mean(name, known) + " (" +
                   (known.empty() ? "the model defines no blocks" : "blocks: " + join(known)) + ")");
  }

  std::vector<std::string> expand_instance(const ConfigNode& item, const std::string& local,
                                           const std::vector<std::string>& inputs, Scope& scope,
                                           const std::string& switch_var) {
    const std::string block = item.child("block").as_string();
    const ConfigNode& def = find_block(item.child("block"));
    if (std::find(active_.begin(), active_.end(), block) != active_.end())
      item.child("block").fail("block '" + block + "' uses itself (" + join(active_) + ", " + block + ")");
    std::optional<ConfigNode> args = def.find("args");
    std::vector<std::string> arg_names = args ? args->keys() : std::vector<std::string>{};

    for (auto it = item.yaml().begin(); it != item.yaml().end(); ++it) {
      const std::string key = it->first.Scalar();
      if (key == "name" || key == "block" || key == "inputs" || key == "if") continue;
      if (std::find(arg_names.begin(), arg_names.end(), key) != arg_names.end()) continue;
      YAML::Mark m = it->first.Mark();
      throw ConfigError({item.file(), m.line + 1, m.column + 1, item.path() + "." + key},
                        "unknown argument '" + key + "' of block '" + block + "'" + did_you_mean(key, arg_names) +
                            " (" + (arg_names.empty() ? "it takes none" : "arguments: " + join(arg_names)) +
                            "; an instance also takes name, block, inputs, if)");
    }
    Env env = vars_;
    for (const std::string& arg : arg_names) {
      if (item.has(arg)) {
        env[arg] = substitute(item.child(arg), *scope.env);
      } else if (args->child(arg).yaml().IsNull()) {
        SourceLocation where = item.location();
        where.key = item.path() + "." + arg;
        throw ConfigError(where, "block '" + block + "' needs argument '" + arg + "'");
      } else {
        env[arg] = substitute(args->child(arg), vars_);
      }
    }
    const YAML::Mark mark = item.has("inputs") ? item.child("inputs").yaml().Mark() : item.yaml().Mark();
    env["in"] = inputs.size() == 1 ? scalar_marked(mark, inputs[0]) : list_marked(mark, inputs);
    for (size_t k = 0; k < inputs.size(); ++k) env["in" + std::to_string(k)] = scalar_marked(mark, inputs[k]);

    Scope inner(scope.prefix + (local.empty() ? "" : local + "."), &env, false, block, inputs);
    inner.switch_var = switch_var;
    active_.push_back(block);
    expand_list(def.child("layers"), inner);
    active_.pop_back();
    if (local.empty()) {
      // Unnamed: the instance is inlined, so its layers are readable by name like the caller's own.
      for (const auto& [name, blobs] : inner.blobs)
        if (!scope.blobs.emplace(name, blobs).second)
          item.fail("block '" + block + "' defines '" + name + "', a name already used here");
    }
    if (!def.has("output")) return inner.previous;
    ConfigNode output = def.child("output");
    const std::string name = substitute_string(output, env);
    auto it = inner.blobs.find(name);
    if (it == inner.blobs.end()) output.fail("block '" + block + "' has no layer '" + name + "'");
    return it->second;
  }

  const ConfigNode model_;
  Env vars_;
  std::map<std::string, std::string> switches_;  // layer name -> the variable its `if` reads
  std::map<std::string, ConfigNode> blocks_;
  std::vector<std::string> active_;  // blocks being expanded, outermost first
  YAML::Node layers_;
};

}  // namespace

ConfigNode expand_model_blocks(const ConfigNode& model, std::map<std::string, std::string>* switched_by) {
  Expander expander(model);
  ConfigNode out = expander.run();
  if (switched_by) *switched_by = expander.switches();
  return out;
}

void apply_model_overrides(ConfigNode& model, const std::vector<std::string>& overrides,
                           const std::string& shown_prefix) {
  const auto read_variables = [&] {
    std::set<std::string> read;
    for (const char* key : {"vars", "blocks", "inputs", "layers"})
      if (model.has(key)) collect_references(model.yaml()[key], read);
    return read;
  };
  const std::set<std::string> read_before = read_variables();
  std::set<std::string> set_directly;
  model.apply_overrides(overrides, shown_prefix);
  for (const std::string& o : overrides)
    if (o.rfind("vars.", 0) == 0) set_directly.insert(o.substr(5, o.find_first_of(".=", 5) - 5));
  if (!model.has("vars") || !model.yaml()["vars"].IsMap()) return;
  // A variable that only fed what an override replaced (net.inputs.data
  // given outright, say) has nothing left to do; removing one can leave
  // another unread, hence the loop.
  for (bool removed = true; removed;) {
    removed = false;
    const std::set<std::string> read_after = read_variables();
    YAML::Node vars = model.yaml()["vars"];
    for (const std::string& name : model.child("vars").keys())
      if (read_before.count(name) && !read_after.count(name) && !set_directly.count(name)) {
        vars.remove(name);
        removed = true;
      }
  }
}

}  // namespace poseidon
