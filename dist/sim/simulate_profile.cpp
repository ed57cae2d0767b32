// Compute profiles: `poseidon time --json` files, or FLOPs at a rate.
#include "dist/sim/simulate_profile.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace poseidon::dist {

double ComputeProfile::iteration_s() const {
  double s = update_s;
  for (double t : forward_s) s += t;
  for (double t : backward_s) s += t;
  return s;
}

namespace {

double non_negative(const nlohmann::json& node, const char* key, const std::string& where) {
  if (!node.contains(key)) throw Error(where + ": no \"" + key + "\"");
  const nlohmann::json& v = node.at(key);
  if (!v.is_number() || v.get<double>() < 0)
    throw Error(where + ": \"" + key + "\" must be a number >= 0, found " + v.dump());
  return v.get<double>();
}

}  // namespace

ComputeProfile load_profile(const std::string& path, const Net& net) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read profile " + path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("profile " + path + " is not JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("layers") || !doc.at("layers").is_array())
    throw Error("profile " + path +
                ": expected an object with \"layers\": [{\"name\", \"forward_ms\", \"backward_ms\"}]");
  ComputeProfile p;
  p.source = path;
  const double batch = non_negative(doc, "batch", "profile " + path);
  if (batch < 1 || batch != static_cast<double>(static_cast<int64_t>(batch)))
    throw Error("profile " + path + ": \"batch\" must be a positive integer, found " + doc.at("batch").dump());
  p.batch = static_cast<int64_t>(batch);
  p.update_s = doc.contains("update_ms") ? non_negative(doc, "update_ms", "profile " + path) / 1e3 : 0;
  if (doc.contains("gflops")) {
    const double g = non_negative(doc, "gflops", "profile " + path);
    if (g <= 0) throw Error("profile " + path + ": \"gflops\" must be positive");
    p.gemm_gflops = g;
  }
  if (doc.contains("memory_gbps")) {
    const double bw = non_negative(doc, "memory_gbps", "profile " + path);
    if (bw <= 0) throw Error("profile " + path + ": \"memory_gbps\" must be positive");
    p.memory_gbps = bw;
  }

  std::map<std::string, size_t> index;  // layer name -> Net index
  for (size_t i = 0; i < net.num_layers(); ++i) index[net.layer(i).name()] = i;
  p.forward_s.assign(net.num_layers(), 0);
  p.backward_s.assign(net.num_layers(), 0);
  std::vector<bool> seen(net.num_layers(), false);
  for (const nlohmann::json& entry : doc.at("layers")) {
    if (!entry.is_object() || !entry.contains("name") || !entry.at("name").is_string())
      throw Error("profile " + path + ": a layer entry without a \"name\": " + entry.dump());
    const std::string name = entry.at("name").get<std::string>();
    const std::string where = "profile " + path + ", layer '" + name + "'";
    auto it = index.find(name);
    if (it == index.end()) throw Error(where + ": model " + net.name() + " has no such layer");
    if (seen[it->second]) throw Error(where + ": listed twice");
    seen[it->second] = true;
    p.forward_s[it->second] = non_negative(entry, "forward_ms", where) / 1e3;
    p.backward_s[it->second] = non_negative(entry, "backward_ms", where) / 1e3;
  }
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (!seen[i])
      throw Error("profile " + path + " has no entry for layer '" + net.layer(i).name() + "' of model " + net.name());
  // Without "gflops", the device's GEMM rate is the one its fc layers ran at
  // (each forward is one GEMM, the kind of product the SFB rebuild runs), not
  // that of the machine reading the profile.
  if (!p.gemm_gflops) {
    double flops = 0, seconds = 0;
    for (size_t i = 0; i < net.num_layers(); ++i)
      if (net.layer(i).type() == "fc" && p.forward_s[i] > 0) {
        flops += static_cast<double>(net.layer(i).forward_flops(net.layer_input_shapes(i))) /
                 static_cast<double>(net.batch()) * static_cast<double>(p.batch);
        seconds += p.forward_s[i];
      }
    if (flops > 0) {
      p.gemm_gflops = flops / seconds / 1e9;
      p.gemm_from_fc_layers = true;
    }
  }
  return p;
}

ComputeProfile flops_profile(const Net& net, int64_t batch, double gflops) {
  POSEIDON_CHECK(batch > 0 && gflops > 0) << batch << " " << gflops;
  ComputeProfile p;
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.4g", gflops);
  p.source = std::string("forward FLOPs at ") + rate + " GFLOP/s, backward twice forward";
  p.batch = batch;
  p.gemm_gflops = gflops;
  for (size_t i = 0; i < net.num_layers(); ++i) {
    const double flops = static_cast<double>(net.layer(i).forward_flops(net.layer_input_shapes(i))) /
                         static_cast<double>(net.batch()) * static_cast<double>(batch);
    p.forward_s.push_back(flops / (gflops * 1e9));
    p.backward_s.push_back(2 * p.forward_s.back());
  }
  return p;
}

}  // namespace poseidon::dist
