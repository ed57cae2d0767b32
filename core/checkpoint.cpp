// Checkpoint save and load: maps the Net's parameters and the Solver's state
// to and from safetensors entries, checking names and shapes before touching
// the net.
#include "core/checkpoint.h"

#include <cstring>

#include "core/device_memory.h"
#include "core/safetensors.h"

namespace poseidon {

namespace {

const std::string kOptimizerPrefix = "optimizer.";
const std::string kMomentumSuffix = ".momentum_buffer";

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("checkpoint '" + path + "': " + what);
}

// "a, b, c" with at most `limit` names, then how many more.
std::string name_list(const std::vector<std::string>& names, size_t limit = 10) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += " and " + std::to_string(names.size() - limit) + " more";
  return out;
}

const SafetensorsTensor& expect_tensor(const std::string& path, const SafetensorsFile& file,
                                       const std::string& name, const Shape& shape) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end())
    fail(path, "tensor '" + name + "' is missing (the model expects shape " + shape_str(shape) + ")");
  if (it->second.shape != shape)
    fail(path, "tensor '" + name + "' has shape " + shape_str(it->second.shape) +
                   ", the model expects " + shape_str(shape));
  return it->second;
}

void copy_into(Tensor& dst, const SafetensorsTensor& src) {
  if (!src.data.empty()) device_memory::copy(dst.data(), dst.device(), src.data.data(), Device{}, src.data.size());
}

// The solver state described by the file's "optimizer.*" entries, checked
// against the net's learnable parameters.
std::map<std::string, Tensor> read_solver_state(const std::string& path, const SafetensorsFile& file,
                                                Net& net) {
  std::map<std::string, Tensor> state;
  for (const auto& [name, tensor] : file.tensors) {
    if (!starts_with(name, kOptimizerPrefix)) continue;
    if (!ends_with(name, kMomentumSuffix) ||
        name.size() <= kOptimizerPrefix.size() + kMomentumSuffix.size())
      fail(path, "optimizer entry '" + name + "' is not of the form optimizer.<param>" + kMomentumSuffix);
    std::string param_name = name.substr(kOptimizerPrefix.size(),
                                         name.size() - kOptimizerPrefix.size() - kMomentumSuffix.size());
    Param* p = net.find_param(param_name);
    if (!p || !p->learnable)
      fail(path, "optimizer entry '" + name + "' refers to '" + param_name +
                     "', which is not a learnable parameter of the model");
    Tensor buf(expect_tensor(path, file, name, p->shape).shape, p->value.device());
    copy_into(buf, tensor);
    state[param_name] = buf;
  }
  return state;
}

}  // namespace

void save_checkpoint(const std::string& path, Net& net, const Solver* solver,
                     const std::map<std::string, std::string>& metadata) {
  // GPU tensors are written from host copies.
  std::vector<std::pair<std::string, Tensor>> host;
  for (Param* p : net.params()) host.emplace_back(p->name, p->value.to(Device{}));
  if (solver)
    for (const auto& [name, buf] : solver->state())
      host.emplace_back(kOptimizerPrefix + name + kMomentumSuffix, buf.to(Device{}));
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (const auto& [name, tensor] : host) entries.emplace_back(name, &tensor);
  write_safetensors(path, entries, metadata);
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, Net& net, Solver* solver) {
  SafetensorsFile file = read_safetensors(path);

  std::vector<std::string> unknown;
  for (const auto& [name, tensor] : file.tensors)
    if (!net.find_param(name) && !starts_with(name, kOptimizerPrefix) && !ends_with(name, "num_batches_tracked"))
      unknown.push_back(name);
  if (!unknown.empty())
    fail(path, "the model has no parameter for tensors " + name_list(unknown) +
                   " (is this a checkpoint of another model?)");

  std::vector<std::pair<Param*, const SafetensorsTensor*>> loads;
  for (Param* p : net.params()) loads.emplace_back(p, &expect_tensor(path, file, p->name, p->shape));
  std::map<std::string, Tensor> state;
  if (solver) state = read_solver_state(path, file, net);

  for (auto& [param, tensor] : loads) copy_into(param->value, *tensor);
  if (solver) solver->state() = std::move(state);
  return file.metadata;
}

}  // namespace poseidon
