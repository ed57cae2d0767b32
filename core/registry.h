// The layer registry, keyed by the YAML `type`. Each layer file registers
// itself with one POSEIDON_REGISTER_LAYER line, documenting its keys, so the
// CLI can list them and configs with unknown keys are rejected.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/layer.h"

namespace poseidon {

struct KeyDoc {
  std::string key;
  std::string type;     // int, float, bool, string, ints (one value or one per dimension), init
  std::string default_value;  // empty: required
  std::string help;
};

struct LayerInfo {
  std::string type;
  std::string summary;
  std::vector<KeyDoc> keys;  // layer-specific keys (name/type/inputs/outputs are common)
  std::function<std::unique_ptr<Layer>(const ConfigNode&)> make;
};

class LayerRegistry {
 public:
  static LayerRegistry& instance();
  void add(LayerInfo info);
  const LayerInfo* find(const std::string& type) const;
  std::vector<const LayerInfo*> all() const;  // sorted by type
  // Builds a layer, checking its keys first. Unknown type: error listing known ones.
  std::unique_ptr<Layer> create(const ConfigNode& config) const;

 private:
  std::vector<LayerInfo> infos_;
};

// Keys every layer accepts.
const std::vector<KeyDoc>& common_layer_keys();
// Keys of layers with a weight and a bias (init and multipliers).
std::vector<KeyDoc> weight_bias_keys();

struct LayerRegistrar {
  explicit LayerRegistrar(LayerInfo info) { LayerRegistry::instance().add(std::move(info)); }
};

}  // namespace poseidon

#define POSEIDON_REGISTER_LAYER(Class, type_name, summary_text, ...)                  \
  static ::poseidon::LayerRegistrar poseidon_registrar_##Class(::poseidon::LayerInfo{ \
      type_name, summary_text, __VA_ARGS__,                                           \
      [](const ::poseidon::ConfigNode& c) -> std::unique_ptr<::poseidon::Layer> {      \
        return std::make_unique<Class>(c);                                            \
      }})
