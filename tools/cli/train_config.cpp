// Training config parsing and validation.
#include "tools/cli/train_config.h"

#include <algorithm>
#include <filesystem>

#include "core/config_blocks.h"
#include "core/device_memory.h"
#include "core/paths.h"
#include "core/plugin.h"
#include "core/safetensors.h"
#include "layers/dnnl_support.h"

namespace poseidon {

namespace {
DataConfig parse_data(const ConfigNode& node, int64_t default_batch, bool default_shuffle) {
  DataConfig d;
  d.node = node;
  if (!node.is_map()) node.fail("expected a map describing a data source");
  d.batch_size = node.get_int("batch_size", default_batch);
  if (d.batch_size <= 0) node.child("batch_size").fail("expected a positive batch size");
  d.shuffle = node.get_bool("shuffle", default_shuffle);
  return d;
}

int64_t non_negative(const ConfigNode& parent, const std::string& key, int64_t def) {
  int64_t v = parent.get_int(key, def);
  if (v < 0) parent.child(key).fail("expected a non-negative integer");
  return v;
}

// Loads the `plugins:` of a model or training config and takes the key out of
// the tree, so the parts that read the rest never see it.
void load_config_plugins(const ConfigNode& root, const std::string& file) {
  auto list = root.find("plugins");
  if (!list) return;
  load_plugins(*list, std::filesystem::path(file).parent_path().string());
  YAML::Node tree = root.yaml();
  tree.remove("plugins");
}

const std::vector<std::string> kConfigKeys = {"model",  "seed",   "threads", "device", "precision",
                                              "deterministic", "cuda_graph", "data", "solver", "train", "dist"};
const std::vector<std::string> kTrainKeys = {"display",           "test_interval",    "test_iters",
                                             "snapshot_interval", "final_checkpoint", "output_dir"};

// Every key a training config can hold, by its full path, so that a key
// written at the wrong level ("output_dir") is pointed to where it belongs.
std::vector<std::string> config_key_paths() {
  std::vector<std::string> paths = kConfigKeys;
  for (const auto& k : kTrainKeys) paths.push_back("train." + k);
  for (const auto& k : SolverConfig::keys()) paths.push_back("solver." + k);
  for (const auto& k : dist::DistConfig::keys()) paths.push_back("dist." + k);
  for (const char* k : {"batch_size", "shuffle"}) paths.push_back(std::string("data.train.") + k);
  return paths;
}

// As node.check_keys(allowed); a key that is the last part of one of
// `key_paths` at another level ("output_dir" for "train.output_dir") is
// named by its full path.
void check_keys_at_their_level(const ConfigNode& node, const std::vector<std::string>& allowed,
                               const std::vector<std::string>& key_paths) {
  if (!node.is_map()) return node.check_keys(allowed);
  for (const std::string& k : node.keys()) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    const std::string here = node.path().empty() ? k : node.path() + "." + k;
    std::string elsewhere;
    for (const std::string& p : key_paths) {
      const size_t dot = p.rfind('.');
      if (p != here && p.substr(dot == std::string::npos ? 0 : dot + 1) == k)
        elsewhere += (elsewhere.empty() ? "'" : " or '") + p + "'";
    }
    if (elsewhere.empty()) continue;
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    node.child(k).fail("unknown key '" + k + "'; did you mean " + elsewhere + "? (allowed: " + list + ")");
  }
  node.check_keys(allowed);
}

// A model file given where a training config is expected: say so and how to
// train it, rather than that its first key is unknown.
void reject_model_file(const ConfigNode& root) {
  if (root.has("model") || !root.has("layers")) return;
  root.fail(
      "this is a model file (it has 'layers' and no 'model'), not a training config: train it from a config "
      "whose `model:` names this file, with data, solver and train sections (configs/fashion_mnist_lenet.yaml, "
      "docs/CONFIG.md); `poseidon summary` and `poseidon time` take a model file as it is");
}
}  // namespace

ConfigNode load_model(const std::string& file, const std::vector<std::string>& overrides,
                      const std::string& shown_prefix) {
  ConfigNode model = ConfigNode::load_file(file);
  if (!model.is_map()) model.fail("expected a model: a map with inputs and layers");
  load_config_plugins(model, file);
  apply_model_overrides(model, overrides, shown_prefix);
  return model;
}

bool is_train_config(const std::string& file) {
  ConfigNode node = ConfigNode::load_file(file);
  return node.has("model");
}

DistModel load_dist_model(const std::string& file, const std::vector<std::string>& overrides, int64_t batch) {
  DistModel m;
  if (is_train_config(file)) {
    TrainConfig c = TrainConfig::load(file, overrides);
    m.model = c.model;
    m.batch = c.train_data.batch_size;
    m.dist = c.dist;
  } else {
    m.model = load_model(file, overrides);
    m.dist.collective.planner_chooses = true;  // no dist key: the planner chooses
  }
  if (batch > 0) m.batch = batch;
  return m;
}

TrainConfig TrainConfig::load(const std::string& file, const std::vector<std::string>& overrides) {
  TrainConfig c;
  c.file = file;
  c.base_dir = std::filesystem::path(file).parent_path().string();
  c.output_dir_location = {file, 0, 0, "train.output_dir"};
  ConfigNode root = ConfigNode::load_file(file);
  std::vector<std::string> net_overrides, config_overrides;
  for (const auto& o : overrides) {
    if (o.rfind("net.", 0) == 0) net_overrides.push_back(o.substr(4));
    else config_overrides.push_back(o);
  }
  root.apply_overrides(config_overrides);
  load_config_plugins(root, file);
  reject_model_file(root);
  const std::vector<std::string> key_paths = config_key_paths();
  check_keys_at_their_level(root, kConfigKeys, key_paths);

  std::filesystem::path model_path(root.get_string("model"));
  if (model_path.is_relative() && !c.base_dir.empty()) model_path = std::filesystem::path(c.base_dir) / model_path;
  c.model_file = model_path.lexically_normal().string();
  if (const std::string why = why_not_a_file(c.model_file); !why.empty())
    root.child("model").fail("model file '" + c.model_file + "' " + why +
                             (std::filesystem::path(root.get_string("model")).is_relative()
                                  ? " (a relative model path is looked up relative to the config's folder, '" +
                                        (c.base_dir.empty() ? std::string(".") : c.base_dir) + "')"
                                  : ""));
  c.model = load_model(c.model_file, net_overrides, "net.");

  c.seed = static_cast<uint64_t>(root.get_int("seed", 1));
  c.threads = static_cast<int>(non_negative(root, "threads", 0));
  try {
    const std::string device = root.get_string("device", "cpu");
    c.device = Device::parse(device);
    c.device_index_given = device.find(':') != std::string::npos;
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    root.child("device").fail(e.what());
  }
  try {
    device_memory::require(c.device);
  } catch (const Error& e) {
    root.child("device").fail(e.what());
  }

  try {
    c.precision = parse_precision(root.get_string("precision", "fp32"));
    require_precision_on(c.precision, c.device);
  } catch (const Error& e) {
    root.child("precision").fail(e.what());
  }
  if (c.precision == Precision::bf16 && !c.device.is_cuda() && !dnnl_runs_bf16_kernels())
    c.warnings.push_back(root.child("precision").location().str() + ": on this CPU conv and fc run " +
                         cpu_bf16_kernels());

  if (root.has("deterministic")) c.deterministic = root.get_bool("deterministic", true);
  c.cuda_graph = parse_cuda_graph_mode(root.get_choice("cuda_graph", {"auto", "off"}, "auto"));

  ConfigNode data = root.child("data");
  check_keys_at_their_level(data, {"train", "test"}, key_paths);
  c.train_data = parse_data(data.child("train"), 64, true);
  if (auto test = data.find("test")) c.test_data = parse_data(*test, 100, false);

  c.solver = SolverConfig::parse(root.child("solver"));
  if (c.solver.lr.warmup_iters >= c.solver.max_iter) {
    const ConfigNode warmup = root.child("solver").child("warmup_iters");
    c.warnings.push_back(warmup.location().str() + ": the warm-up (" + std::to_string(c.solver.lr.warmup_iters) +
                         " iterations) is not shorter than the run (solver.max_iter " +
                         std::to_string(c.solver.max_iter) + "): the learning rate never reaches solver.lr");
  }

  if (auto train = root.find("train")) {
    check_keys_at_their_level(*train, kTrainKeys, key_paths);
    c.display = non_negative(*train, "display", c.display);
    c.test_interval = non_negative(*train, "test_interval", 0);
    c.test_iters = non_negative(*train, "test_iters", 0);
    c.snapshot_interval = non_negative(*train, "snapshot_interval", 0);
    c.final_checkpoint = train->get_bool("final_checkpoint", true);
    c.output_dir = train->get_string("output_dir", c.output_dir);
    if (auto dir = train->find("output_dir")) c.output_dir_location = dir->location();
  }
  if (auto dist = root.find("dist"))
    c.dist = dist::DistConfig::parse(*dist);
  else
    c.dist.collective.planner_chooses = true;  // no dist key: the planner chooses, as for a dist: with none of them
  return c;
}

std::vector<std::string> prepare_output_dir(const TrainConfig& c) {
  if (const std::string why = make_directory(c.output_dir); !why.empty())
    throw ConfigError(c.output_dir_location, "output directory '" + c.output_dir + "': " + why);
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(c.output_dir, ec)) {
    if (!entry.is_regular_file(ec) || !is_safetensors_temporary(entry.path().filename().string())) continue;
    if (std::filesystem::remove(entry.path(), ec)) removed.push_back(entry.path().string());
  }
  return removed;
}

}  // namespace poseidon
