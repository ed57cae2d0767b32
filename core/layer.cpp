// Layer base: config fields common to all layers and parameter declaration.
#include "core/layer.h"

namespace poseidon {

ParamInit ParamInit::parse(const ConfigNode& node) {
  ParamInit init;
  static const std::vector<std::string> types = {"default", "constant", "uniform",
                                                 "gaussian", "xavier", "msra"};
  if (node.is_scalar()) {
    init.type = node.as_string();
  } else {
    node.check_keys({"type", "value", "low", "high", "std"});
    init.type = node.get_string("type");
    init.value = node.get_double("value", init.value);
    init.low = node.get_double("low", init.low);
    init.high = node.get_double("high", init.high);
    init.std = node.get_double("std", init.std);
  }
  if (std::find(types.begin(), types.end(), init.type) == types.end())
    node.fail("unknown init type '" + init.type +
              "' (expected default, constant, uniform, gaussian, xavier or msra)");
  return init;
}

Layer::Layer(const ConfigNode& config) : config_(config) {
  name_ = config.get_string("name");
  type_ = config.get_string("type");
  if (config.has("inputs")) inputs_ = config.child("inputs").as_string_list();
  outputs_ = config.has("outputs") ? config.child("outputs").as_string_list()
                                   : std::vector<std::string>{name_};
  if (config.has("precision")) {
    const ConfigNode node = config.child("precision");
    const std::string value = node.as_string();
    if (value != "fp32" && value != "bf16")
      node.fail("layer '" + name_ + "': expected precision fp32 or bf16, got '" + value +
                "' (tf32 is the GPU's math for a whole run: the training config's precision)");
    own_precision_ = parse_precision(value);
  }
}

void Layer::set_default_inputs(const std::vector<std::string>& inputs) {
  if (inputs_.empty()) inputs_ = inputs;
}

Param& Layer::declare_param(const std::string& suffix, const Shape& shape, ParamInit init,
                            bool learnable) {
  std::string full = name_ + "." + suffix;
  for (Param& p : params_) {
    if (p.name != full) continue;
    if (p.shape != shape)
      fail("parameter " + full + " changed shape from " + shape_str(p.shape) + " to " +
           shape_str(shape) + "; input shapes must not change the parameter shapes");
    return p;
  }
  Param p;
  p.name = full;
  p.shape = shape;
  p.learnable = learnable;
  if (learnable) {
    bool is_bias = suffix == "bias";
    std::string init_key = suffix + "_init";
    if (config_.has(init_key)) {
      ParamInit user = ParamInit::parse(config_.child(init_key));
      user.fan_in = init.fan_in;
      user.fan_out = init.fan_out;
      init = user;
    }
    p.lr_mult = config_.get_double(is_bias ? "bias_lr_mult" : "lr_mult", 1.0);
    p.decay_mult = config_.get_double(is_bias ? "bias_decay_mult" : "decay_mult", 1.0);
  }
  p.init = init;
  params_.push_back(std::move(p));
  return params_.back();
}

void Layer::fail(const std::string& what, const std::string& key) const {
  if (!key.empty()) {
    if (auto c = config_.find(key)) c->fail(what);
  }
  SourceLocation where = config_.location();
  throw ConfigError(where, "layer '" + name_ + "' (" + type_ + "): " + what);
}

}  // namespace poseidon
