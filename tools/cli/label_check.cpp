// Label range check of a data source against the layers that read labels.
#include "tools/cli/label_check.h"

#include <algorithm>

namespace poseidon {

void check_labels(Net& net, const Source& source, const ConfigNode& where) {
  if (net.input_names().size() < 2) return;
  const std::string& labels = net.input_names()[1];
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const Layer& layer = net.layer(i);
    const auto& inputs = layer.inputs();
    if (inputs.size() < 2 || std::find(inputs.begin() + 1, inputs.end(), labels) == inputs.end()) continue;
    const Shape logits = net.layer_input_shapes(i).front();
    if (logits.size() < 2) continue;
    const int64_t ignored = layer.config().get_int("ignore_label", -1);
    const std::string bad = source.find_label_outside(logits[1], ignored);
    if (bad.empty()) continue;
    where.fail(bad + ": out of range for layer '" + layer.name() + "' (" + layer.type() + "), which takes " +
               std::to_string(logits[1]) + " classes (labels 0 to " + std::to_string(logits[1] - 1) + ")");
  }
}

}  // namespace poseidon
