// Labels the model cannot take, found before training: each layer that
// reads the label input (a loss, an accuracy metric) accepts class indices
// below its logits' class count (or its ignore_label); a source that knows
// its labels cheaply (IDX files, list files, synthetic data) is checked
// against every such layer, so a bad label is not first met when its batch
// comes up, possibly hours into a run.
#pragma once

#include "core/config_node.h"
#include "core/net.h"
#include "data/source.h"

namespace poseidon {

// Fails at `where` (the data section) naming the first bad label and the
// layer it does not fit.
void check_labels(Net& net, const Source& source, const ConfigNode& where);

}  // namespace poseidon
