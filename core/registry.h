// The layer registry, keyed by the YAML `type`. Each layer file registers
// itself with one POSEIDON_REGISTER_LAYER line, documenting its keys, so the
// CLI can list them and configs with unknown keys are rejected. A layer's GPU
// implementation (layers/<type>.cu, a subclass of the CPU class with the same
// keys and parameters) registers with POSEIDON_REGISTER_CUDA_LAYER.
#pragma once

#include <functional>
#include <map>
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

using LayerFactory = std::function<std::unique_ptr<Layer>(const ConfigNode&)>;

struct LayerInfo {
  std::string type;
  std::string summary;
  std::vector<KeyDoc> keys;  // layer-specific keys (name/type/inputs/outputs are common)
  LayerFactory make;
};

// Registrations held back while a plug-in library loads (core/plugin.h), so
// the loader can check the library before any of its types take effect.
struct HeldRegistrations {
  std::vector<LayerInfo> layers;
  std::vector<std::pair<std::string, LayerFactory>> cuda;
};

class LayerRegistry {
 public:
  static LayerRegistry& instance();
  void add(LayerInfo info);
  void add_cuda(const std::string& type, LayerFactory make);
  const LayerInfo* find(const std::string& type) const;
  std::vector<const LayerInfo*> all() const;  // sorted by type
  bool has_cuda(const std::string& type) const { return cuda_makers_.count(type) > 0; }
  // Where a type comes from: the plug-in library's path, empty for built-in types.
  std::string origin(const std::string& type) const;
  void set_origin(const std::string& type, const std::string& library) { origins_[type] = library; }
  // While `into` is set, add() and add_cuda() collect there instead of registering.
  void hold_registrations(HeldRegistrations* into) { held_ = into; }
  // Builds a layer for `device`, checking its keys first. Unknown type: error
  // listing known ones. A type without a GPU implementation on a GPU runs its
  // CPU layer there (core/host_fallback_layer.h), saying so on stderr.
  std::unique_ptr<Layer> create(const ConfigNode& config, const Device& device = {}) const;

 private:
  std::vector<LayerInfo> infos_;
  std::map<std::string, LayerFactory> cuda_makers_;
  std::map<std::string, std::string> origins_;
  HeldRegistrations* held_ = nullptr;
};

// Keys every layer accepts.
const std::vector<KeyDoc>& common_layer_keys();
// Keys of layers with a weight and a bias (init and multipliers).
std::vector<KeyDoc> weight_bias_keys();

struct LayerRegistrar {
  explicit LayerRegistrar(LayerInfo info) { LayerRegistry::instance().add(std::move(info)); }
  LayerRegistrar(const std::string& cuda_type, LayerFactory make) {
    LayerRegistry::instance().add_cuda(cuda_type, std::move(make));
  }
};

}  // namespace poseidon

#define POSEIDON_REGISTER_LAYER(Class, type_name, summary_text, ...)                  \
  static ::poseidon::LayerRegistrar poseidon_registrar_##Class(::poseidon::LayerInfo{ \
      type_name, summary_text, __VA_ARGS__,                                           \
      [](const ::poseidon::ConfigNode& c) -> std::unique_ptr<::poseidon::Layer> {      \
        return std::make_unique<Class>(c);                                            \
      }})

#define POSEIDON_REGISTER_CUDA_LAYER(Class, type_name)                                       \
  static ::poseidon::LayerRegistrar poseidon_cuda_registrar_##Class(                         \
      type_name, [](const ::poseidon::ConfigNode& c) -> std::unique_ptr<::poseidon::Layer> { \
        return std::make_unique<Class>(c);                                                   \
      })
