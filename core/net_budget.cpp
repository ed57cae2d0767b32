// The memory check of a shapes-only Net (Net::ShapesOnly): a model too large
// for the machine is blamed on what made it large, the first net input,
// layer output or parameter that alone exceeds the memory, at the key that
// sets its size (an fc's num_output, an input's shape), rather than on the
// later layer whose working buffers are the first to fail to allocate.
#include <algorithm>
#include <optional>

#include "core/model_summary.h"
#include "core/net.h"

namespace poseidon {

namespace {

double tensor_bytes(const Shape& shape, DType type = DType::f32) {
  double n = static_cast<double>(dtype_size(type));
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

// The key of a layer's config whose integer value is the largest of the
// dimensions of `shape` that it equals: what the user wrote that sized the
// tensor; none when no key's value is one of them.
std::optional<ConfigNode> sizing_key(const ConfigNode& layer, const Shape& shape) {
  std::optional<ConfigNode> best;
  int64_t best_value = 1;
  for (const std::string& key : layer.keys()) {
    const ConfigNode node = layer.child(key);
    if (!node.is_scalar()) continue;
    int64_t value = 0;
    try {
      value = node.as_int();
    } catch (const ConfigError&) {
      continue;
    }
    if (value <= best_value || std::find(shape.begin(), shape.end(), value) == shape.end()) continue;
    best = node;
    best_value = value;
  }
  return best;
}

}  // namespace

void Net::require_fits_alone(int layer) const {
  if (budget_.memory_bytes <= 0) return;
  const int64_t batch = budget_.memory_batch > 0 ? budget_.memory_batch : batch_;
  // A blob's shape at the checked batch.
  auto at_batch = [&](Shape shape) {
    if (!shape.empty() && shape[0] == batch_) shape[0] = batch;
    return shape;
  };
  auto fail = [&](const ConfigNode& at, const std::string& what, double bytes) {
    throw BeyondMemory(at.location(),
                       what + " alone needs " + bytes_text(bytes) + ", more than " + budget_.memory_name);
  };
  if (layer < 0) {
    for (const std::string& in : input_names_) {
      const Shape shape = at_batch(blob_shapes_[blob_index_.at(in)]);
      const double bytes = tensor_bytes(shape);
      if (bytes > budget_.memory_bytes)
        fail(input_nodes_.at(in), "net input '" + in + "': a batch of " + std::to_string(batch) +
                                      " examples of shape " + shape_str(input_shapes_.at(in)), bytes);
    }
    return;
  }
  const Layer& l = *layers_[layer];
  const std::string named = "layer '" + l.name() + "' (" + l.type() + "): ";
  auto where = [&](const Shape& shape, std::string& what) {
    std::optional<ConfigNode> key = sizing_key(l.config(), shape);
    if (!key) return l.config();
    what += " (set by " + key->path().substr(key->path().rfind('.') + 1) + ": " + key->as_string() + ")";
    return *key;
  };
  for (const Param& p : l.params()) {
    const double bytes = tensor_bytes(p.shape);
    if (bytes <= budget_.memory_bytes) continue;
    std::string what = named + "its parameter " + p.name + " of shape " + shape_str(p.shape);
    const ConfigNode at = where(p.shape, what);
    fail(at, what, bytes);
  }
  for (size_t k = 0; k < layer_out_[layer].size(); ++k) {
    const Shape shape = at_batch(blob_shapes_[layer_out_[layer][k]]);
    const double bytes = tensor_bytes(shape, blob_types_[layer_out_[layer][k]]);
    if (bytes <= budget_.memory_bytes) continue;
    std::string what = named + "its output '" + blobs_[layer_out_[layer][k]].name + "' of shape " +
                       shape_str(shape) + " at batch " + std::to_string(batch);
    const ConfigNode at = where(Shape(shape.begin() + 1, shape.end()), what);
    fail(at, what, bytes);
  }
}

}  // namespace poseidon
