// Reading and writing plan records (see plan_file.h).
#include "dist/plan/plan_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace poseidon::dist {

namespace {
constexpr const char* kFormat = "poseidon-plan-1";

nlohmann::json link_json(const LinkModel& link) {
  return {{"bandwidth_gbps", link.bandwidth_gbps}, {"latency_us", link.latency_us}, {"gemm_gflops", link.gemm_gflops}};
}

LinkModel link_from(const nlohmann::json& j) {
  LinkModel link;
  link.bandwidth_gbps = j.at("bandwidth_gbps").get<double>();
  link.latency_us = j.at("latency_us").get<double>();
  link.gemm_gflops = j.at("gemm_gflops").get<double>();
  if (!(link.bandwidth_gbps > 0) || !(link.latency_us >= 0) || !(link.gemm_gflops > 0))
    throw std::invalid_argument("link figures must be positive");
  return link;
}

Scheme scheme_from(const std::string& name) {
  for (Scheme s : {Scheme::ps, Scheme::sfb, Scheme::allreduce, Scheme::lowrank})
    if (scheme_name(s) == name) return s;
  throw std::invalid_argument("unknown scheme '" + name + "' (expected ps, sfb, allreduce or lowrank)");
}
}  // namespace

TunedOptions TunedOptions::of(const DistConfig& config) {
  return TunedOptions{config.order, config.block_bytes, config.bucket_bytes, config.collective};
}

void apply_tuned(const TunedOptions& tuned, DistConfig& config) {
  config.order = tuned.order;
  config.block_bytes = tuned.block_bytes;
  config.bucket_bytes = tuned.bucket_bytes;
  config.collective = tuned.collective;
}

namespace {
nlohmann::json tuned_json(const TunedOptions& t) {
  return {{"order", order_name(t.order)},
          {"block_bytes", t.block_bytes},
          {"bucket_bytes", t.bucket_bytes},
          {"allreduce", algorithm_name(t.collective.allreduce)},
          {"fusion", t.collective.fusion_auto ? "auto" : "fixed"},
          {"spread_blocks", t.collective.spread_blocks},
          {"ranks_per_host", t.collective.ranks_per_host},
          {"host_bandwidth_gbps", t.collective.host_bandwidth_gbps},
          {"host_latency_us", t.collective.host_latency_us}};
}

TunedOptions tuned_from(const nlohmann::json& j) {
  TunedOptions t;
  t.order = parse_send_order(j.at("order").get<std::string>());
  t.block_bytes = j.at("block_bytes").get<int64_t>();
  t.bucket_bytes = j.at("bucket_bytes").get<int64_t>();
  if (t.block_bytes < 4 || t.block_bytes % 4 || t.bucket_bytes < 4 || t.bucket_bytes % 4)
    throw std::invalid_argument("block_bytes and bucket_bytes must be positive multiples of 4");
  t.collective.allreduce = parse_algorithm(j.at("allreduce").get<std::string>());
  const std::string fusion = j.at("fusion").get<std::string>();
  if (fusion != "auto" && fusion != "fixed") throw std::invalid_argument("fusion must be auto or fixed");
  t.collective.fusion_auto = fusion == "auto";
  t.collective.spread_blocks = j.at("spread_blocks").get<bool>();
  t.collective.ranks_per_host = j.at("ranks_per_host").get<int>();
  t.collective.host_bandwidth_gbps = j.at("host_bandwidth_gbps").get<double>();
  t.collective.host_latency_us = j.at("host_latency_us").get<double>();
  if (t.collective.ranks_per_host < 1 || !(t.collective.host_bandwidth_gbps > 0) ||
      !(t.collective.host_latency_us >= 0))
    throw std::invalid_argument("ranks_per_host, host_bandwidth_gbps must be positive, host_latency_us not negative");
  return t;
}
}  // namespace

PlanRecord plan_record(const CommPlan& plan, Net& net, const LinkModel& link) {
  PlanRecord r;
  r.model = net.name();
  r.workers = plan.world_size;
  r.batch = net.batch();
  r.link = link;
  std::map<size_t, Scheme> by_layer;
  for (const PlannedParam& p : plan.params) by_layer[p.layer] = p.scheme;
  for (const auto& [layer, scheme] : by_layer) r.layers.emplace_back(net.layer(layer).name(), scheme);
  for (const PlannedParam& p : plan.params)
    if (p.wire != Wire::fp32) r.wires[net.layer(p.layer).name()] = p.wire;
  for (const SyncGroup& g : plan.groups)
    if (g.scheme == Scheme::lowrank) r.ranks[net.layer(plan.params[g.params[0]].layer).name()] = g.rank;
  return r;
}

PlanRecord plan_record(const std::vector<LayerPlan>& layers, Net& net, int workers, int64_t batch,
                       const LinkModel& link) {
  PlanRecord r;
  r.model = net.name();
  r.workers = workers;
  r.batch = batch;
  r.link = link;
  for (const LayerPlan& lp : layers) {
    r.layers.emplace_back(net.layer(lp.layer).name(), lp.scheme);
    if (lp.wire != Wire::fp32) r.wires[net.layer(lp.layer).name()] = lp.wire;
    if (lp.scheme == Scheme::lowrank && lp.rank > 0) r.ranks[net.layer(lp.layer).name()] = lp.rank;
  }
  return r;
}

std::string plan_json(const PlanRecord& record) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& [name, scheme] : record.layers) layers.push_back({{"name", name}, {"scheme", scheme_name(scheme)}});
  for (nlohmann::json& layer : layers) {
    const std::string name = layer["name"].get<std::string>();
    if (auto wire = record.wires.find(name); wire != record.wires.end()) layer["wire"] = wire_name(wire->second);
    if (auto rank = record.ranks.find(name); rank != record.ranks.end()) layer["rank"] = rank->second;
  }
  nlohmann::json j = {{"format", kFormat},          {"model", record.model}, {"workers", record.workers},
                      {"batch", record.batch},      {"link", link_json(record.link)},
                      {"layers", layers}};
  if (record.tuned) j["tuned"] = tuned_json(*record.tuned);
  return j.dump(2) + "\n";
}

PlanRecord read_plan_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw Error(path + ": is a directory, not a plan file");
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read the plan file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ": not JSON (" + e.what() + ")");
  }
  PlanRecord r;
  std::string key = "format";
  try {
    if (j.at(key).get<std::string>() != kFormat)
      throw std::invalid_argument(std::string("expected \"") + kFormat + "\"");
    key = "model";
    r.model = j.at(key).get<std::string>();
    key = "workers";
    r.workers = j.at(key).get<int>();
    key = "batch";
    r.batch = j.at(key).get<int64_t>();
    key = "link";
    r.link = link_from(j.at(key));
    key = "layers";
    for (const auto& layer : j.at(key))
      r.layers.emplace_back(layer.at("name").get<std::string>(), scheme_from(layer.at("scheme").get<std::string>()));
    for (const auto& layer : j.at(key))
      if (layer.contains("wire"))
        r.wires[layer.at("name").get<std::string>()] = parse_wire(layer.at("wire").get<std::string>());
    for (size_t i = 0; i < r.layers.size(); ++i) {
      const nlohmann::json& layer = j.at("layers").at(i);
      if (!layer.contains("rank")) continue;
      key = "layers[" + std::to_string(i) + "].rank";
      const nlohmann::json& rank = layer.at("rank");
      if (!rank.is_number_integer() || rank.get<int64_t>() < 1 || rank.get<int64_t>() > (1 << 20))
        throw std::invalid_argument("expected an integer from 1 (the rank of the factors of layer '" +
                                    r.layers[i].first + "'), found " + rank.dump());
      if (r.layers[i].second != Scheme::lowrank)
        throw std::invalid_argument("a rank is for lowrank layers only; layer '" + r.layers[i].first + "' is " +
                                    scheme_name(r.layers[i].second));
      r.ranks[r.layers[i].first] = rank.get<int>();
    }
    key = "tuned";
    if (j.contains(key)) r.tuned = tuned_from(j.at(key));
  } catch (const std::exception& e) {
    throw Error(path + ": key '" + key + "': " + e.what());
  }
  return r;
}

void write_plan_file(const std::string& path, const PlanRecord& record) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << plan_json(record);
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(path + ": cannot write the plan file");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write the plan file (" + ec.message() + ")");
  }
}

std::string link_text(const LinkModel& link) { return link_json(link).dump(); }

std::optional<LinkModel> parse_link_text(const std::string& text) {
  try {
    return link_from(nlohmann::json::parse(text));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::map<size_t, Scheme> pinned_schemes(const PlanRecord& record, Net& net, const std::string& path) {
  std::map<std::string, size_t> layer_of;
  for (size_t i = 0; i < net.num_layers(); ++i) layer_of[net.layer(i).name()] = i;
  std::map<size_t, Scheme> out;
  for (const auto& [name, scheme] : record.layers) {
    auto it = layer_of.find(name);
    if (it == layer_of.end()) throw Error(path + ": layer '" + name + "' is not a layer of model '" + net.name() + "'");
    if (scheme == Scheme::sfb && !sfb_applicable(net, it->second))
      throw Error(path + ": layer '" + name + "' cannot synchronise by sfb (an FC layer whose input is batch x inputs)");
    out[it->second] = scheme;
  }
  for (const PlannedParam& p : backward_order(net))
    if (!out.count(p.layer))
      throw Error(path + ": no scheme for layer '" + net.layer(p.layer).name() + "' (plan made for model '" +
                  record.model + "')");
  return out;
}

std::map<size_t, int> pinned_ranks(const PlanRecord& record, Net& net, const std::string& path) {
  std::map<size_t, int> out;
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (auto rank = record.ranks.find(net.layer(i).name()); rank != record.ranks.end()) {
      if (!lowrank_applicable(net, i, rank->second))
        throw Error(path + ": layer '" + rank->first + "' cannot be compressed to rank " +
                    std::to_string(rank->second) + " (lowrank needs a weight of two or more dimensions, both sides " +
                    "above the rank)");
      out[i] = rank->second;
    }
  return out;
}

std::map<size_t, Wire> pinned_wires(const PlanRecord& record, Net& net) {
  std::map<size_t, Wire> out;
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (auto wire = record.wires.find(net.layer(i).name()); wire != record.wires.end()) out[i] = wire->second;
  return out;
}

}  // namespace poseidon::dist
