// Checkpoint save and load: maps the Net's parameters and the Solver's state
// to and from safetensors entries, checking names and shapes before touching
// the net.
#include "core/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/device_memory.h"

namespace poseidon {

namespace {

const std::string kOptimizerPrefix = "optimizer.";
const std::string kStepName = "step";

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

// The solver state described by the file's "optimizer.*" entries (PyTorch's
// "optimizer.<param>.<state name>" and, for rules that count steps,
// "optimizer.<param>.step"), checked against the net's learnable parameters
// and packed as the solver keeps it: every state name of a parameter or none.
void read_solver_state(const std::string& path, const SafetensorsFile& file, Net& net, Solver& solver,
                       std::map<std::string, Tensor>& state, std::map<std::string, int64_t>& steps) {
  std::vector<std::string> suffixes = solver.state_names();
  if (solver.counts_steps()) suffixes.push_back(kStepName);
  std::string forms;
  for (const auto& s : suffixes) forms += (forms.empty() ? "" : ", ") + kOptimizerPrefix + "<param>." + s;
  // Per parameter, the entry of each suffix (null when absent).
  std::map<std::string, std::vector<const SafetensorsTensor*>> found;
  for (const auto& [name, tensor] : file.tensors) {
    if (!starts_with(name, kOptimizerPrefix)) continue;
    size_t which = 0;
    while (which < suffixes.size() && !(ends_with(name, "." + suffixes[which]) &&
                                        name.size() > kOptimizerPrefix.size() + suffixes[which].size() + 1))
      ++which;
    if (which == suffixes.size())
      fail(path, "optimizer entry '" + name + "' is not of the form " + forms + " (the state of solver type " +
                     solver.config().type + ")");
    std::string param_name =
        name.substr(kOptimizerPrefix.size(), name.size() - kOptimizerPrefix.size() - suffixes[which].size() - 1);
    Param* p = net.find_param(param_name);
    if (!p || !p->learnable)
      fail(path, "optimizer entry '" + name + "' refers to '" + param_name +
                     "', which is not a learnable parameter of the model");
    expect_tensor(path, file, name, suffixes[which] == kStepName ? Shape{} : p->shape);
    auto& entries = found[param_name];
    entries.resize(suffixes.size(), nullptr);
    entries[which] = &tensor;
  }
  const size_t slots = solver.state_names().size();
  for (const auto& [param_name, entries] : found) {
    for (size_t i = 0; i < suffixes.size(); ++i)
      if (!entries[i])
        fail(path, "optimizer entry '" + kOptimizerPrefix + param_name + "." + suffixes[i] +
                       "' is missing (the file holds other state of that parameter)");
    Param* p = net.find_param(param_name);
    Tensor host(solver.state_shape(p->shape));
    for (size_t i = 0; i < slots; ++i)
      std::copy(entries[i]->data.begin(), entries[i]->data.end(), host.data() + i * p->value.numel());
    state[param_name] = host.to(p->value.device());
    if (!solver.counts_steps()) continue;
    const float step = entries[slots]->data.at(0);
    if (!(step >= 1 && step == std::floor(step)))
      fail(path, "optimizer entry '" + kOptimizerPrefix + param_name + "." + kStepName +
                     "' is not a positive whole number of steps");
    steps[param_name] = static_cast<int64_t>(step);
  }
}

}  // namespace

void save_checkpoint(const std::string& path, Net& net, const Solver* solver,
                     const std::map<std::string, std::string>& metadata,
                     const std::vector<StreamedTensor>& compression) {
  // GPU tensors are written from host copies.
  std::vector<std::pair<std::string, Tensor>> host;
  for (Param* p : net.params()) host.emplace_back(p->name, p->value.to(Device{}));
  if (solver) {
    // Packed state is split into one tensor per state name, shaped like the parameter.
    const std::vector<std::string>& names = solver->state_names();
    for (const auto& [name, buf] : solver->state()) {
      const Tensor packed = buf.to(Device{});
      const int64_t numel = packed.numel() / static_cast<int64_t>(names.size());
      const Shape shape = names.size() == 1 ? packed.shape() : Shape(packed.shape().begin() + 1, packed.shape().end());
      for (size_t i = 0; i < names.size(); ++i) {
        Tensor slot(shape);
        std::copy(packed.data() + i * numel, packed.data() + (i + 1) * numel, slot.data());
        host.emplace_back(kOptimizerPrefix + name + "." + names[i], slot);
      }
    }
    for (const auto& [name, step] : solver->steps()) {
      Tensor count(Shape{});
      count[0] = static_cast<float>(step);
      host.emplace_back(kOptimizerPrefix + name + "." + kStepName, count);
    }
  }
  for (const StreamedTensor& entry : compression)
    POSEIDON_CHECK(starts_with(entry.name, kCompressionPrefix)) << entry.name;
  std::vector<std::pair<std::string, const Tensor*>> entries;
  for (const auto& [name, tensor] : host) entries.emplace_back(name, &tensor);
  std::map<std::string, std::string> with_layers = metadata;
  with_layers[kLayersMetadata] = layer_list(net);
  write_safetensors(path, entries, with_layers, compression);
}

std::string layer_list(const Net& net) {
  std::string list;
  for (size_t i = 0; i < net.num_layers(); ++i)
    list += (list.empty() ? "" : ",") + net.layer(i).name() + ":" + net.layer(i).type();
  return list;
}

LayerMismatch compare_checkpoint_layers(const std::map<std::string, std::string>& metadata, const Net& net) {
  LayerMismatch m;
  auto saved = metadata.find(kLayersMetadata);
  if (saved == metadata.end()) return m;
  auto split = [](const std::string& list) {
    std::vector<std::string> out;
    for (size_t start = 0; start < list.size();) {
      size_t comma = std::min(list.find(',', start), list.size());
      const std::string item = list.substr(start, comma - start);
      const size_t colon = item.rfind(':');
      out.push_back(colon == std::string::npos ? item : item.substr(0, colon) + " (" + item.substr(colon + 1) + ")");
      start = comma + 1;
    }
    return out;
  };
  const std::vector<std::string> in_file = split(saved->second), in_net = split(layer_list(net));
  for (const auto& l : in_net)
    if (std::find(in_file.begin(), in_file.end(), l) == in_file.end()) m.missing.push_back(l);
  for (const auto& l : in_file)
    if (std::find(in_net.begin(), in_net.end(), l) == in_net.end()) m.extra.push_back(l);
  return m;
}

std::map<std::string, std::string> load_checkpoint(const std::string& path, Net& net, Solver* solver,
                                                   std::map<std::string, DeferredTensor>* compression) {
  // Compression state is left in the file: its owner reads the part it needs.
  SafetensorsFile file =
      read_safetensors(path, [](const std::string& name) { return starts_with(name, kCompressionPrefix); });

  std::vector<std::string> unknown;
  for (const auto& [name, tensor] : file.tensors)
    if (!net.find_param(name) && !starts_with(name, kOptimizerPrefix) && !starts_with(name, kCompressionPrefix) &&
        !ends_with(name, "num_batches_tracked"))
      unknown.push_back(name);
  if (!unknown.empty())
    fail(path, "the model has no parameter for tensors " + name_list(unknown) +
                   " (is this a checkpoint of another model?)");

  std::vector<std::pair<Param*, const SafetensorsTensor*>> loads;
  for (Param* p : net.params()) loads.emplace_back(p, &expect_tensor(path, file, p->name, p->shape));
  std::map<std::string, Tensor> state;
  std::map<std::string, int64_t> steps;
  if (solver) read_solver_state(path, file, net, *solver, state, steps);

  for (auto& [param, tensor] : loads) copy_into(param->value, *tensor);
  values_written(net.params());  // a net in training may load between an update and its next forward
  if (compression) *compression = std::move(file.deferred);
  if (solver) {
    solver->state() = std::move(state);
    solver->steps() = std::move(steps);
  }
  return file.metadata;
}

}  // namespace poseidon
