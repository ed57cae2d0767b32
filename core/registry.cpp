// Layer registry: lookup by type, key validation, and the common key set.
#include "core/registry.h"

#include <algorithm>
#include <cstdio>

#include "core/host_fallback_layer.h"

#include "core/suggest.h"

namespace poseidon {

LayerRegistry& LayerRegistry::instance() {
  static LayerRegistry registry;
  return registry;
}

void LayerRegistry::add(LayerInfo info) {
  if (held_) {
    held_->layers.push_back(std::move(info));
    return;
  }
  POSEIDON_CHECK(!find(info.type)) << "layer type registered twice: " << info.type;
  infos_.push_back(std::move(info));
}

void LayerRegistry::add_cuda(const std::string& type, LayerFactory make) {
  if (held_) {
    held_->cuda.emplace_back(type, std::move(make));
    return;
  }
  POSEIDON_CHECK(!cuda_makers_.count(type)) << "CUDA layer type registered twice: " << type;
  cuda_makers_[type] = std::move(make);
}

std::string LayerRegistry::origin(const std::string& type) const {
  auto it = origins_.find(type);
  return it == origins_.end() ? "" : it->second;
}

const LayerInfo* LayerRegistry::find(const std::string& type) const {
  for (const auto& i : infos_)
    if (i.type == type) return &i;
  return nullptr;
}

std::vector<const LayerInfo*> LayerRegistry::all() const {
  std::vector<const LayerInfo*> out;
  for (const auto& i : infos_) out.push_back(&i);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->type < b->type; });
  return out;
}

std::unique_ptr<Layer> LayerRegistry::create(const ConfigNode& config, const Device& device) const {
  config.child("name");
  ConfigNode type_node = config.child("type");
  std::string type = type_node.as_string();
  const LayerInfo* info = find(type);
  if (!info) {
    std::string known;
    std::vector<std::string> types;
    for (const auto* i : all()) {
      known += (known.empty() ? "" : ", ") + i->type;
      types.push_back(i->type);
    }
    // A type no built-in name is close to most often comes from a plug-in
    // library that this run has not loaded.
    const std::string near = did_you_mean(type, types);
    const std::string plugin_hint =
        near.empty() ? "; if a plug-in library defines it, load it first with --plugin PATH or a `plugins:` list"
                     : "";
    type_node.fail("unknown layer type '" + type + "'" + near + plugin_hint + " (known types: " + known + ")");
  }
  std::vector<std::string> allowed;
  for (const auto& k : common_layer_keys()) allowed.push_back(k.key);
  for (const auto& k : info->keys) allowed.push_back(k.key);
  config.check_keys(allowed);
  for (const auto& k : info->keys)
    if (k.default_value.empty()) config.child(k.key);  // required keys
  if (!device.is_cuda()) return info->make(config);
  auto cuda = cuda_makers_.find(type);
  if (cuda != cuda_makers_.end()) return cuda->second(config);
  std::fprintf(stderr, "layer '%s' (%s): no GPU implementation, runs on the CPU with its data copied around it\n",
               config.get_string("name").c_str(), type.c_str());
  return std::make_unique<HostFallbackLayer>(config, info->make(config));
}

const std::vector<KeyDoc>& common_layer_keys() {
  static const std::vector<KeyDoc> keys = {
      {"name", "string", "", "unique layer name; parameters are saved as <name>.weight, ..."},
      {"type", "string", "", "registered layer type"},
      {"inputs", "strings", "previous layer's outputs", "input blob names"},
      {"outputs", "strings", "[<name>]", "output blob names"},
      {"precision", "string", "the run's", "fp32 or bf16: this layer's arithmetic, whatever the run's precision"},
  };
  return keys;
}

std::vector<KeyDoc> weight_bias_keys() {
  return {
      {"bias", "bool", "true", "learn an additive bias"},
      {"weight_init", "init", "default", "default|constant|uniform|gaussian|xavier|msra or a map"},
      {"bias_init", "init", "default", "as weight_init"},
      {"lr_mult", "float", "1", "learning-rate multiplier of the weight"},
      {"decay_mult", "float", "1", "weight-decay multiplier of the weight"},
      {"bias_lr_mult", "float", "1", "learning-rate multiplier of the bias"},
      {"bias_decay_mult", "float", "1", "weight-decay multiplier of the bias"},
  };
}

}  // namespace poseidon
