// The model files' configuration language, beside the YAML access of
// core/config_node.h: variables and parameterised blocks. Repeated modules
// (an Inception branch, a ResNet bottleneck, a VGG stage) are written once in
// a model file and instantiated by name. Expansion rewrites the YAML tree into the plain
// layer list the Net builds from, keeping every node's source mark so errors
// still point at the file, line and column the user wrote.
//
//   vars: {num_classes: 1000, aux: true}      # overridable: --set net.vars.aux=false
//   blocks:
//     conv_bn:
//       args: {out: null, k: 1}                # null: a required argument
//       layers:
//         - {name: conv, type: conv, num_output: $out, kernel_size: $k, bias: false}
//         - {name: bn, type: batch_norm}
//   layers:
//     - {name: stem, block: conv_bn, inputs: data, out: 32, k: 3}
//     - {name: head, type: fc, num_output: $num_classes}
//     - {name: aux, type: fc, num_output: 10, if: $aux}
//
// Rules (docs/CONFIG.md, "Models", is the user's version):
// - `$name` as a whole scalar is replaced by the variable's value node (a
//   list stays a list); `${expr}` and `$name` inside a longer string are
//   replaced by their text; expr is integer arithmetic (+ - * and
//   parentheses) over integers and variables.
// - In a block, names resolve to its arguments, `$in` (the instance's
//   inputs: one name or a list) and `$in0`, `$in1`, ..., then to the model's
//   vars. Model vars may use earlier vars. Every var must be used somewhere.
// - An instance's layers are named "<instance>.<inner>" (no prefix when the
//   instance has no name); its output is its last layer's output or the
//   block's declared `output`, readable under the instance name.
// - Inside a block, a literal input name is a sibling defined earlier; outer
//   blobs come in through `$in`. The first layer reads the instance's inputs.
// - `if: false` removes a layer or instance; wherever it is read, its single
//   input stands in for its output (a disabled layer is an identity).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config_node.h"

namespace poseidon {

// Returns the model without `vars` and `blocks`: every variable substituted,
// every instance expanded, every `if` applied, and every layer given its
// inputs explicitly. Other top-level keys pass through for the Net to check.
// `switched_by`, when given, receives for each layer kept by an `if` that
// reads a model variable as a whole (`if: $aux`) that variable's name, so an
// error in such a layer can say which variable leaves it out.
ConfigNode expand_model_blocks(const ConfigNode& model, std::map<std::string, std::string>* switched_by = nullptr);

// Applies command-line overrides ("layers.fc2.num_output=5") to a model's
// tree. A variable of the file that only the replaced values read (as
// `size` when net.inputs.data is given outright) is dropped rather than
// reported unused; one an override sets itself still must be read. Errors
// in the overridden values name "--set <shown_prefix><override>".
void apply_model_overrides(ConfigNode& model, const std::vector<std::string>& overrides,
                           const std::string& shown_prefix = "");

}  // namespace poseidon
