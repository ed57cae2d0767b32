// Plug-in loader: dlopen with the library's registrations held back, then the
// checks, then the registrations. The library stays loaded for the process.
#include "core/plugin.h"

#include <dlfcn.h>

#include <filesystem>
#include <set>

#include "core/registry.h"

namespace poseidon {

namespace {
std::set<std::string>& loaded() {
  static std::set<std::string> files;
  return files;
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error("plug-in '" + path + "': " + why);
}

// Checks a loaded library's marker and types; returns the reason it is
// refused, or an empty string.
std::string check(void* library, const HeldRegistrations& held) {
  using AbiVersion = int (*)();
  auto version = reinterpret_cast<AbiVersion>(dlsym(library, "poseidon_plugin_abi_version"));
  if (!version)
    return "no symbol poseidon_plugin_abi_version (add POSEIDON_PLUGIN() from core/plugin.h to one of its files)";
  if (int v = version(); v != kLayerAbiVersion)
    return "built against layer contract version " + std::to_string(v) + ", this poseidon has version " +
           std::to_string(kLayerAbiVersion) + " (rebuild it against this installation)";
  if (held.layers.empty()) return "registers no layer type";
  const LayerRegistry& registry = LayerRegistry::instance();
  std::set<std::string> types;
  for (const auto& info : held.layers) {
    if (!types.insert(info.type).second) return "registers layer type '" + info.type + "' twice";
    if (registry.find(info.type)) {
      std::string owner = registry.origin(info.type);
      return "layer type '" + info.type + "' is already registered " + (owner.empty() ? "(built in)" : "by " + owner);
    }
  }
  for (const auto& [type, make] : held.cuda)
    if (!types.count(type)) return "GPU implementation of '" + type + "' without its CPU layer";
  return "";
}
}  // namespace

void load_plugin(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) refuse(path, "file not found");
  std::string file = std::filesystem::canonical(path, error).string();
  if (loaded().count(file)) return;

  LayerRegistry& registry = LayerRegistry::instance();
  HeldRegistrations held;
  registry.hold_registrations(&held);
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  registry.hold_registrations(nullptr);
  if (!library) refuse(path, std::string("cannot be loaded: ") + dlerror());
  if (std::string why = check(library, held); !why.empty()) {
    held = {};  // its factories point into the library
    dlclose(library);
    refuse(path, why);
  }
  for (auto& info : held.layers) {
    registry.set_origin(info.type, file);
    registry.add(std::move(info));
  }
  for (auto& [type, make] : held.cuda) registry.add_cuda(type, std::move(make));
  loaded().insert(file);
}

void load_plugins(const ConfigNode& list, const std::string& base_dir) {
  for (size_t i = 0; i < (list.is_sequence() ? list.size() : 1); ++i) {
    ConfigNode entry = list.is_sequence() ? list.at(i) : list;
    std::filesystem::path path(entry.as_string());
    if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
    try {
      load_plugin(path.lexically_normal().string());
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      entry.fail(e.what());
    }
  }
}

}  // namespace poseidon
