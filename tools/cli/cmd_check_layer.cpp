// `poseidon check-layer TYPE`: the finite-difference gradient check of the
// tests (core/grad_check.h) for any registered type, plug-ins included, so a
// layer's author checks it without writing a test. Each numeric key the
// user does not set is also checked at values other than its default.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/grad_check.h"
#include "core/registry.h"
#include "tools/cli/commands.h"

namespace poseidon {

namespace {
Shape parse_shape(const std::string& text) {
  Shape shape;
  std::stringstream in(text);
  std::string dim;
  while (std::getline(in, dim, ',')) {
    size_t used = 0;
    int64_t d = 0;
    try {
      d = std::stoll(dim, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != dim.size() || d <= 0)
      throw Error("--shape '" + text + "': expected positive dimensions separated by commas, e.g. 2,3,8,8");
    shape.push_back(d);
  }
  if (shape.empty()) throw Error("--shape: empty");
  return shape;
}

// Values of a numeric key besides its default, so that a backward that
// drops the key's term (correct only where the term is 1 or 0) fails: a
// float's default scaled by 1.7 and by 0.4 (0.37 and 1.3 where it is 0), an
// int's plus one; init keys ("constant 1") vary their constant as a float.
// None for other keys.
std::vector<std::string> other_values(const KeyDoc& key) {
  std::string text = key.default_value;
  const bool init = key.type == "init";
  if (init) {
    if (text.rfind("constant ", 0) != 0) return {};
    text = text.substr(9);
  } else if (key.type != "float" && key.type != "int") {
    return {};
  }
  double d = 0;
  size_t used = 0;
  try {
    d = std::stod(text, &used);
  } catch (const std::exception&) {
    return {};
  }
  if (used != text.size()) return {};
  std::vector<double> others = {d + 1};
  if (key.type != "int") others = d == 0 ? std::vector<double>{0.37, 1.3} : std::vector<double>{d * 1.7, d * 0.4};
  std::vector<std::string> values;
  for (double other : others) {
    std::ostringstream v;
    v << other;
    values.push_back(init ? "{type: constant, value: " + v.str() + "}" : v.str());
  }
  return values;
}



std::string layer_yaml(const std::string& type, const std::vector<std::string>& settings) {
  YAML::Node layer;
  layer["name"] = type;
  layer["type"] = type;
  for (const auto& s : settings) apply_override(layer, s);
  YAML::Emitter out;
  out << YAML::Flow << layer;
  return out.c_str();
}
// One check, its entries printed; true when the gradients agree.
bool check_and_print(const GradCase& c, const std::string& title) {
  GradCheckReport report = run_grad_check(c);
  std::printf("%s\n", title.c_str());
  for (const auto& e : report.entries) {
    std::string verdict = e.mismatches ? std::to_string(e.mismatches) + " mismatches" : "ok";
    std::printf("  %-24s %8lld values  max relative error %.2e  %s\n", e.what.c_str(),
                static_cast<long long>(e.checked), e.max_error, verdict.c_str());
  }
  if (report.entries.empty()) std::printf("  no input or parameter takes a gradient\n");
  if (!report.passed()) std::printf("%s\n", report.mismatches.c_str());
  return report.passed();
}
}  // namespace

int cmd_check_layer(const CheckLayerArgs& args) {
  const LayerInfo* info = LayerRegistry::instance().find(args.type);
  if (!info)
    throw Error("unknown layer type '" + args.type + "' (poseidon layers lists them; a plug-in's need --plugin)");
  GradCase c;
  c.name = args.type;
  c.yaml = layer_yaml(args.type, args.settings);
  for (const auto& s : args.shapes) c.inputs.push_back(parse_shape(s));
  if (c.inputs.empty()) c.inputs.push_back({2, 3, 4, 4});
  if (args.labels > 0) {
    c.label_classes.assign(c.inputs.size(), 0);
    c.label_classes.back() = args.labels;
  }
  c.train = !args.test_phase;
  c.step = args.step;
  c.tolerance = args.tolerance;

  std::string shapes;
  for (const auto& s : c.inputs) shapes += (shapes.empty() ? "" : ", ") + shape_str(s);
  std::printf("check-layer %s\n  layer: %s\n  inputs: %s%s; step %g, tolerance %g, %s phase\n", args.type.c_str(),
              c.yaml.c_str(), shapes.c_str(), args.labels > 0 ? " (the last: labels)" : "", c.step, c.tolerance,
              c.train ? "train" : "test");
  bool passed = check_and_print(c, "as given:");

  // Each numeric key not given, at another value than its default.
  for (const KeyDoc& key : args.given_values_only ? std::vector<KeyDoc>{} : info->keys) {
    const std::string prefix = key.key + "=";
    if (std::any_of(args.settings.begin(), args.settings.end(),
                    [&](const std::string& s) { return s.rfind(prefix, 0) == 0; }))
      continue;
    for (const std::string& value : other_values(key)) {
      GradCase varied = c;
      std::vector<std::string> settings = args.settings;
      settings.push_back(prefix + value);
      varied.yaml = layer_yaml(args.type, settings);
      try {
        passed = check_and_print(varied, "with " + prefix + value + ":") && passed;
      } catch (const Error& e) {
        std::printf("with %s%s: skipped, the layer refuses it (%s)\n", prefix.c_str(), value.c_str(), e.what());
      }
    }
  }
  if (passed) {
    std::printf("gradients agree with finite differences\n");
    return 0;
  }
  std::printf("FAILED: backward disagrees with finite differences\n");
  return 1;
}

}  // namespace poseidon
