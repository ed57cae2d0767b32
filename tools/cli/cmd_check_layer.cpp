// `poseidon check-layer TYPE`: the finite-difference gradient check of the
// tests (core/grad_check.h) for any registered type, plug-ins included, so a
// layer's author checks it without writing a test.
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

std::string layer_yaml(const std::string& type, const std::vector<std::string>& settings) {
  YAML::Node layer;
  layer["name"] = type;
  layer["type"] = type;
  for (const auto& s : settings) apply_override(layer, s);
  YAML::Emitter out;
  out << YAML::Flow << layer;
  return out.c_str();
}
}  // namespace

int cmd_check_layer(const CheckLayerArgs& args) {
  if (!LayerRegistry::instance().find(args.type))
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
  GradCheckReport report = run_grad_check(c);
  for (const auto& e : report.entries) {
    std::string verdict = e.mismatches ? std::to_string(e.mismatches) + " mismatches" : "ok";
    std::printf("  %-24s %8lld values  max relative error %.2e  %s\n", e.what.c_str(),
                static_cast<long long>(e.checked), e.max_error, verdict.c_str());
  }
  if (report.entries.empty()) std::printf("  no input or parameter takes a gradient\n");
  if (report.passed()) {
    std::printf("gradients agree with finite differences\n");
    return 0;
  }
  std::printf("FAILED: backward disagrees with finite differences\n%s\n", report.mismatches.c_str());
  return 1;
}

}  // namespace poseidon
