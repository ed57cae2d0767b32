// Model vars and parameterised blocks: expansion into named layers, variable
// substitution and arithmetic, switchable layers, overrides, and errors that
// name the file, line and key the user wrote.
#include "core/config_blocks.h"

#include <gtest/gtest.h>

#include "core/net.h"

namespace poseidon {

namespace {
ConfigNode parse(const std::string& yaml) { return ConfigNode::parse(yaml, "model.yaml"); }

std::vector<std::string> layer_names(const Net& net) {
  std::vector<std::string> names;
  for (size_t i = 0; i < net.num_layers(); ++i) names.push_back(net.layer(i).name());
  return names;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A two-branch module made of conv_bn instances, instantiated twice.
const char* kNested = R"(name: nested
vars: {classes: 5, width: 4}
inputs: {data: [2, 6, 6], label: []}
blocks:
  conv_bn:
    args: {out: null, k: 1, p: 0}
    layers:
      - {name: conv, type: conv, num_output: $out, kernel_size: $k, pad: $p, bias: false}
      - {name: bn, type: batch_norm, eps: 0.001}
      - {name: relu, type: relu}
  mixed:
    args: {c: null}
    layers:
      - {name: branch1x1, block: conv_bn, out: $width}
      - {name: branch7_1, block: conv_bn, inputs: $in, out: $c}
      - {name: branch7_2, block: conv_bn, out: $c, k: [1, 3], p: [0, 1]}
      - {name: pool, type: pool, mode: avg, inputs: $in0, kernel_size: 3, stride: 1, pad: 1}
      - {name: cat, type: concat, inputs: [branch1x1, branch7_2, pool]}
layers:
  - {name: Mixed_a, block: mixed, inputs: data, c: 3}
  - {name: Mixed_b, block: mixed, c: "${2 * (width - 1)}"}
  - {name: fc, type: fc, inputs: Mixed_b, num_output: $classes}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";
}  // namespace

TEST(ModelBlocks, InstancesExpandToPrefixedLayersWithTorchStyleParameterNames) {
  Net net(parse(kNested), 2);
  std::vector<std::string> names = layer_names(net);
  for (const char* n : {"Mixed_a.branch1x1.conv", "Mixed_a.branch1x1.bn", "Mixed_a.branch7_2.relu", "Mixed_a.pool",
                        "Mixed_a.cat", "Mixed_b.branch7_1.conv", "Mixed_b.cat", "fc", "loss"})
    EXPECT_TRUE(contains(names, n)) << n;
  EXPECT_EQ(net.num_layers(), 2u * (3 * 3 + 2) + 2);
  ASSERT_NE(net.find_param("Mixed_a.branch7_2.conv.weight"), nullptr);
  // The list-valued argument k = [1, 3] reaches kernel_size whole.
  EXPECT_EQ(net.find_param("Mixed_a.branch7_2.conv.weight")->shape, (Shape{3, 3, 1, 3}));
  ASSERT_NE(net.find_param("Mixed_b.branch7_2.bn.running_var"), nullptr);
  // c = 2 * (width - 1) = 6 in the second instance, which reads the first's concat (4 + 3 + 2 channels).
  EXPECT_EQ(net.find_param("Mixed_b.branch7_1.conv.weight")->shape, (Shape{6, 9, 1, 1}));
  EXPECT_EQ(net.blob("Mixed_b.cat").value.shape(), (Shape{2, 4 + 6 + 9, 6, 6}));
  EXPECT_EQ(net.find_param("fc.weight")->shape, (Shape{5, 19 * 36}));
  // `$in0` and the default (the instance's input) both reach the block's input.
  EXPECT_EQ(net.layer_input_shapes(std::find(names.begin(), names.end(), "Mixed_b.pool") - names.begin()),
            (std::vector<Shape>{{2, 9, 6, 6}}));
}

TEST(ModelBlocks, VariablesAreOverriddenBeforeExpansion) {
  ConfigNode model = parse(kNested);
  apply_override(model.yaml(), "vars.classes=7");
  apply_override(model.yaml(), "layers.Mixed_a.c=2");
  Net net(model, 1);
  EXPECT_EQ(net.find_param("fc.weight")->shape[0], 7);
  EXPECT_EQ(net.find_param("Mixed_a.branch7_1.conv.weight")->shape[0], 2);
}

TEST(ModelBlocks, DisabledLayersAreIdentities) {
  // A residual block whose projection shortcut is switchable, as in ResNet.
  const char* yaml = R"(name: res
vars: {aux: false}
inputs: {data: [4, 5, 5], label: []}
blocks:
  residual:
    args: {out: null, project: false}
    layers:
      - {name: conv, type: conv, num_output: $out, kernel_size: 3, pad: 1}
      - {name: down.0, type: conv, inputs: $in, num_output: $out, kernel_size: 1, if: $project}
      - {name: down.1, type: batch_norm, if: $project}
      - {name: add, type: sum, inputs: [conv, down.1]}
layers:
  - {name: r1, block: residual, out: 6, project: true}
  - {name: r2, block: residual, out: 6}
  - {name: head, type: fc, num_output: 3}
  - {name: aux_head, type: fc, inputs: r1, num_output: 3, if: $aux}
  - {name: loss, type: softmax_loss, inputs: [head, label]}
  - {name: aux_loss, type: softmax_loss, inputs: [aux_head, label], loss_weight: 0.4, if: $aux}
)";
  Net net(parse(yaml), 2);
  std::vector<std::string> names = layer_names(net);
  EXPECT_TRUE(contains(names, "r1.down.0"));
  EXPECT_TRUE(contains(names, "r1.down.1"));
  EXPECT_FALSE(contains(names, "r2.down.0"));
  EXPECT_FALSE(contains(names, "aux_head"));
  EXPECT_EQ(net.loss_outputs(), std::vector<std::string>{"loss"});
  // r2's sum reads r2's own input (r1's output) where the shortcut is disabled.
  size_t add = std::find(names.begin(), names.end(), "r2.add") - names.begin();
  ASSERT_LT(add, names.size());
  EXPECT_EQ(net.layer(add).inputs(), (std::vector<std::string>{"r2.conv", "r1.add"}));

  ConfigNode with_aux = parse(yaml);
  apply_override(with_aux.yaml(), "vars.aux=true");
  Net aux(with_aux, 2);
  EXPECT_TRUE(contains(layer_names(aux), "aux_head"));
  EXPECT_EQ(aux.loss_outputs(), (std::vector<std::string>{"loss", "aux_loss"}));
}

TEST(ModelBlocks, UnnamedInstancesSpliceArithmeticNames) {
  // torchvision numbers a Sequential's children: features.0, features.1, ...
  const char* yaml = R"(name: seq
inputs: {data: [1, 8, 8]}
blocks:
  conv_relu:
    args: {at: null}
    layers:
      - {name: "features.${at}", type: conv, num_output: 2, kernel_size: 3, pad: 1}
      - {name: "features.${at + 1}", type: relu}
  stage:
    args: {at: null}
    output: "features.${at + 2}"
    layers:
      - {block: conv_relu, at: $at}
      - {name: "features.${at + 2}", type: pool, kernel_size: 2}
      - {name: "probe.${at}", type: relu, inputs: "features.${at + 1}"}
layers:
  - {block: stage, at: 0}
  - {block: stage, at: 3}
  - {name: head, type: fc, num_output: 2}
)";
  Net net(parse(yaml), 1);
  std::vector<std::string> names = layer_names(net);
  for (const char* n : {"features.0", "features.1", "features.2", "features.3", "features.4", "features.5"})
    EXPECT_TRUE(contains(names, n)) << n;
  // The declared output, not the block's last layer, feeds the next stage.
  size_t second = std::find(names.begin(), names.end(), "features.3") - names.begin();
  EXPECT_EQ(net.layer(second).inputs(), std::vector<std::string>{"features.2"});
  EXPECT_EQ(net.blob("features.5").value.shape(), (Shape{1, 2, 2, 2}));
  // An unnamed instance is inlined: its caller reads its layers by their own names.
  size_t probe = std::find(names.begin(), names.end(), "probe.3") - names.begin();
  ASSERT_LT(probe, names.size());
  EXPECT_EQ(net.layer(probe).inputs(), std::vector<std::string>{"features.4"});
}

TEST(ModelBlocks, PlainModelsKeepTheirLayersAndMarks) {
  const char* yaml = R"(name: plain
inputs: {data: [3], label: []}
layers:
  - {name: h, type: fc, num_output: 4}
  - {name: out, type: fc, num_output: 2}
  - {name: loss, type: softmax_loss, inputs: [out, label]}
)";
  ConfigNode expanded = expand_model_blocks(parse(yaml));
  ASSERT_EQ(expanded.child("layers").size(), 3u);
  ConfigNode out = expanded.child("layers").at(1);
  EXPECT_EQ(out.location().line, 5);
  EXPECT_EQ(out.location().column, 5);
  EXPECT_EQ(out.child("num_output").location().line, 5);
  EXPECT_EQ(out.get_string("name"), "out");
  EXPECT_EQ(out.child("inputs").as_string_list(), std::vector<std::string>{"h"});
  EXPECT_EQ(expanded.child("layers").at(0).child("inputs").as_string_list(), std::vector<std::string>{"data"});
}

namespace {
// Expands `yaml` into a Net and returns the ConfigError it must raise.
ConfigError expansion_error(const std::string& yaml) {
  try {
    Net net(parse(yaml), 1);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << yaml;
  return ConfigError({}, "none");
}

const char* kHead = R"(name: bad
vars: {n: 3}
inputs: {data: [4]}
blocks:
  dense:
    args: {out: null, scale: 1}
    layers:
      - {name: fc, type: fc, num_output: $out}
      - {name: act, type: relu}
)";

struct ErrorCase {
  std::string name;
  std::string layers;  // appended to kHead
  int line, column;
  std::string key;      // the key path the error names
  std::string message;  // a phrase of the message
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class ModelBlockErrors : public ::testing::TestWithParam<ErrorCase> {};
}  // namespace

TEST_P(ModelBlockErrors, NameFileLineAndKey) {
  const ErrorCase& c = GetParam();
  ConfigError e = expansion_error(std::string(kHead) + "layers:\n" + c.layers);
  EXPECT_EQ(e.where().file, "model.yaml");
  EXPECT_EQ(e.where().line, c.line) << e.what();
  EXPECT_EQ(e.where().column, c.column) << e.what();
  EXPECT_EQ(e.where().key, c.key) << e.what();
  EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("model.yaml:" + std::to_string(c.line)), std::string::npos) << e.what();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ModelBlockErrors,
    ::testing::Values(
        ErrorCase{"unknown_block", "  - {name: a, block: densse, out: $n}\n", 11, 22, "layers.a.block",
                  "unknown block 'densse'; did you mean 'dense'? (blocks: dense)"},
        ErrorCase{"missing_argument", "  - {name: a, block: dense, scale: $n}\n", 11, 5, "layers.a.out",
                  "block 'dense' needs argument 'out'"},
        ErrorCase{"unknown_argument", "  - {name: a, block: dense, out: $n, scal: 2}\n", 11, 38, "layers.a.scal",
                  "unknown argument 'scal' of block 'dense'; did you mean 'scale'? (arguments: out, scale"},
        ErrorCase{"unknown_variable", "  - {name: a, type: fc, num_output: $m}\n", 11, 37, "layers.a.num_output",
                  "unknown variable '$m'; did you mean 'n'? (known: n)"},
        ErrorCase{"unknown_variable_in_block", "  - {name: a, block: dense, out: $nn}\n", 11, 34, "layers.a.out",
                  "unknown variable '$nn'; did you mean 'n'?"},
        ErrorCase{"bad_expression", "  - {name: a, type: fc, num_output: \"${n +}\"}\n", 11, 37, "layers.a.num_output",
                  "cannot evaluate '${n +}'"},
        ErrorCase{"reads_later_instance",
                  "  - {name: x, type: fc, inputs: a, num_output: $n}\n  - {name: a, block: dense, out: 2}\n", 11, 33,
                  "layers.x.inputs", "'a' is defined after this layer"},
        ErrorCase{"unused_variable", "  - {name: a, block: dense, out: 2}\n", 2, 8, "vars.n",
                  "variable 'n' is not used by the model"},
        // Line and column are where the value was written; the key is the expanded layer's.
        ErrorCase{"value_error_points_at_argument",
                  "  - {name: a, block: dense, out: $n}\n  - {name: b, block: dense, out: -2}\n", 12, 34,
                  "layers.b.fc.num_output", "num_output must be at least 1"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

TEST(ModelBlocks, ErrorsInsideBlocksPointAtTheBlockDefinition) {
  ConfigError e = expansion_error(R"(name: bad
inputs: {data: [4]}
blocks:
  pair:
    layers:
      - {name: one, type: fc, num_output: 2}
      - {name: two, type: fc, inputs: three, num_output: 2}
      - {name: three, type: relu}
layers:
  - {name: p, block: pair}
)");
  EXPECT_EQ(e.where().line, 7);
  EXPECT_EQ(e.where().key, "blocks.pair.layers.two.inputs");
  EXPECT_NE(std::string(e.what()).find("'three' is defined after this layer"), std::string::npos) << e.what();

  ConfigError loop = expansion_error(R"(name: bad
inputs: {data: [4]}
blocks:
  a:
    layers: [{name: x, block: b}]
  b:
    layers: [{name: y, block: a}]
layers:
  - {name: top, block: a}
)");
  EXPECT_EQ(loop.where().line, 7);
  EXPECT_NE(std::string(loop.what()).find("block 'a' uses itself (a, b, a)"), std::string::npos) << loop.what();
}

// An input size given outright (net.inputs.data) leaves the variable that
// set it unread: it is dropped, not reported; a misspelt variable override
// is still an error that names the variable meant.
const char* kSized = R"(name: sized
vars: {size: 8, side: $size, classes: 3}
inputs: {data: [1, $side, $side], label: []}
layers:
  - {name: conv, type: conv, inputs: data, num_output: $classes, kernel_size: 3}
  - {name: pool, type: adaptive_avg_pool, output_size: 1}
  - {name: loss, type: softmax_loss, inputs: [pool, label]}
)";

TEST(ModelBlocks, OverridingWhatReadAVariableDropsIt) {
  ConfigNode model = parse(kSized);
  apply_model_overrides(model, {"inputs.data=[1, 6, 6]"});
  Net net(model, 1);
  EXPECT_EQ(net.blob("data").value.shape(), (Shape{1, 1, 6, 6}));
  // `side` read `size`: both go.
  EXPECT_FALSE(model.child("vars").has("side"));
  EXPECT_FALSE(model.child("vars").has("size"));
  EXPECT_TRUE(model.child("vars").has("classes"));
}

TEST(ModelBlocks, AVariableSetAndThenLeftUnreadIsStillAnError) {
  ConfigNode model = parse(kSized);
  apply_model_overrides(model, {"vars.side=6", "inputs.data=[1, 6, 6]"});
  try {
    Net net(model, 1);
    FAIL() << "a variable override that changes nothing was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where().key, "vars.side");
    EXPECT_NE(std::string(e.what()).find("variable 'side' is not used"), std::string::npos) << e.what();
  }
}

TEST(ModelBlocks, AMisspeltVariableOverrideSaysWhichWasMeant) {
  ConfigNode model = parse(kSized);
  apply_model_overrides(model, {"vars.clases=5"});
  try {
    Net net(model, 1);
    FAIL() << "a misspelt variable override was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("variable 'clases' is not used by the model; did you mean 'classes'?"),
              std::string::npos)
        << e.what();
  }
}

// A layer that an `if` on a model variable keeps, and that does not fit the
// input (Inception's auxiliary head at a small size), names the variable
// that leaves it out.
TEST(ModelBlocks, ALayerKeptByAnIfNamesTheVariableThatLeavesItOut) {
  const char* yaml = R"(name: aux
vars: {size: 8, aux: true}
inputs: {data: [1, $size, $size], label: []}
blocks:
  head:
    layers:
      - {name: pool, type: pool, kernel_size: 5, stride: 3}
      - {name: fc, type: fc, num_output: 2}
layers:
  - {name: trunk, type: conv, inputs: data, num_output: 2, kernel_size: 3}
  - {name: side, block: head, inputs: trunk, if: $aux}
  - {name: fc, type: fc, inputs: trunk, num_output: 2}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
)";
  EXPECT_NO_THROW(Net(parse(yaml), 1));
  ConfigNode small = parse(yaml);
  apply_model_overrides(small, {"vars.size=5"});
  try {
    Net net(small, 1);
    FAIL() << "a 5x5 pool on a 3x3 map was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where().key, "layers.side.pool.kernel_size");
    EXPECT_NE(std::string(e.what()).find("layer 'side.pool' is in the model because vars.aux is true: --set "
                                         "net.vars.aux=false leaves it out"),
              std::string::npos)
        << e.what();
  }
  ConfigNode without = parse(yaml);
  apply_model_overrides(without, {"vars.size=5", "vars.aux=false"});
  EXPECT_NO_THROW(Net(without, 1));
}

}  // namespace poseidon
