// Plug-ins: shared libraries of layers built outside the tree against an
// installed Poseidon (find_package(Poseidon)). A plug-in registers its layers
// with POSEIDON_REGISTER_LAYER like a built-in one and marks itself with
// POSEIDON_PLUGIN() in one of its files; the loader checks the layer contract
// version it was built against and that none of its types exists already
// before any of them takes effect.
#pragma once

#include <string>

#include "core/config_node.h"

namespace poseidon {

// The version of the layer contract (core/layer.h, core/registry.h,
// core/tensor.h, core/config_node.h). Raised whenever a change there would
// break a plug-in compiled against the previous headers.
inline constexpr int kLayerAbiVersion = 3;

// Loads one plug-in library; loading the same file again does nothing.
// Failures (missing file, unloadable library, no POSEIDON_PLUGIN() marker,
// another contract version, a type already registered) throw an Error
// naming the library and the reason.
void load_plugin(const std::string& path);

// Loads a config's `plugins:` list (a path or a list of paths), resolving
// relative paths against `base_dir`; errors are located at the entry.
void load_plugins(const ConfigNode& list, const std::string& base_dir);

}  // namespace poseidon

#define POSEIDON_PLUGIN()                                                                     \
  extern "C" __attribute__((visibility("default"))) int poseidon_plugin_abi_version() { \
    return ::poseidon::kLayerAbiVersion;                                                      \
  }
