// Plug-ins with one planted fault each, built from this file with one of
// these defined, for the tests of the loader and of check-layer:
//   POSEIDON_TEST_PLUGIN_overwrite      backward overwrites the input gradient
//   POSEIDON_TEST_PLUGIN_no_marker      no POSEIDON_PLUGIN() marker
//   POSEIDON_TEST_PLUGIN_other_version  built against another contract version
//   POSEIDON_TEST_PLUGIN_builtin_type   registers a built-in type (relu)
//   POSEIDON_TEST_PLUGIN_dropped_term   backward drops a key's factor, right
//                                       only at the key's default
#include "core/plugin.h"
#include "core/registry.h"

namespace {

using namespace poseidon;

// y = 2x.
class Doubling : public Layer {
 public:
  using Layer::Layer;
  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }
  void forward(LayerIO& io, RunContext&) override {
    for (int64_t i = 0; i < io.in[0]->numel(); ++i) (*io.out[0])[i] = 2 * (*io.in[0])[i];
  }
  void backward(LayerIO& io, RunContext&) override {
    if (!io.in_grad[0]) return;
    for (int64_t i = 0; i < io.in[0]->numel(); ++i) {
#ifdef POSEIDON_TEST_PLUGIN_overwrite
      (*io.in_grad[0])[i] = 2 * (*io.out_grad[0])[i];
#else
      (*io.in_grad[0])[i] += 2 * (*io.out_grad[0])[i];
#endif
    }
  }
};

// y = scale * x, whose backward forgets `scale`: right only at scale 1.
class ForgetfulScaling : public Layer {
 public:
  explicit ForgetfulScaling(const ConfigNode& config)
      : Layer(config), scale_(static_cast<float>(config.get_double("scale", 1.0))) {}
  std::vector<Shape> reshape(const std::vector<Shape>& in) override { return {in[0]}; }
  void forward(LayerIO& io, RunContext&) override {
    for (int64_t i = 0; i < io.in[0]->numel(); ++i) (*io.out[0])[i] = scale_ * (*io.in[0])[i];
  }
  void backward(LayerIO& io, RunContext&) override {
    if (!io.in_grad[0]) return;
    for (int64_t i = 0; i < io.in[0]->numel(); ++i) (*io.in_grad[0])[i] += (*io.out_grad[0])[i];
  }

 private:
  float scale_;
};

}  // namespace

#if defined(POSEIDON_TEST_PLUGIN_dropped_term)
POSEIDON_REGISTER_LAYER(ForgetfulScaling, "forgetful_scale", "scale * x, its backward drops scale",
                        {{"scale", "float", "1", "multiplier"}});
POSEIDON_PLUGIN()
#elif defined(POSEIDON_TEST_PLUGIN_overwrite)
POSEIDON_REGISTER_LAYER(Doubling, "overwriting_double", "2x, its backward overwrites", {});
POSEIDON_PLUGIN()
#elif defined(POSEIDON_TEST_PLUGIN_no_marker)
POSEIDON_REGISTER_LAYER(Doubling, "unmarked_double", "2x, in a library without the marker", {});
#elif defined(POSEIDON_TEST_PLUGIN_other_version)
POSEIDON_REGISTER_LAYER(Doubling, "other_version_double", "2x, built against another contract", {});
extern "C" __attribute__((visibility("default"))) int poseidon_plugin_abi_version() { return kLayerAbiVersion + 1; }
#elif defined(POSEIDON_TEST_PLUGIN_builtin_type)
POSEIDON_REGISTER_LAYER(Doubling, "relu", "2x under a built-in type's name", {});
POSEIDON_PLUGIN()
#endif
