// Parsing and validation of the `dist:` section.
#include "dist/plan/dist_config.h"

#include <algorithm>

namespace poseidon::dist {

std::string scheme_name(Scheme s) {
  switch (s) {
    case Scheme::ps:
      return "ps";
    case Scheme::sfb:
      return "sfb";
    case Scheme::allreduce:
      return "allreduce";
    case Scheme::lowrank:
      return "lowrank";
  }
  return "?";
}

namespace {
const std::vector<std::string> kChoiceNames = {"hybrid", "ps", "sfb", "allreduce"};
const std::vector<std::string> kOrderNames = {"backward", "priority"};
const std::vector<std::string> kAlgorithmNames = {"ring", "halving_doubling", "two_level", "auto"};
const std::vector<std::string> kCompressionNames = {"off", "lossless", "auto"};
}  // namespace

std::string compression_name(Compression c) { return kCompressionNames.at(static_cast<size_t>(c)); }

std::string choice_name(SchemeChoice c) { return kChoiceNames.at(static_cast<size_t>(c)); }

SchemeChoice parse_scheme_choice(const std::string& name) {
  for (size_t i = 0; i < kChoiceNames.size(); ++i)
    if (kChoiceNames[i] == name) return static_cast<SchemeChoice>(i);
  throw Error("unknown scheme '" + name + "' (expected hybrid, ps, sfb or allreduce)");
}

std::string order_name(SendOrder o) { return kOrderNames.at(static_cast<size_t>(o)); }

SendOrder parse_send_order(const std::string& name) {
  for (size_t i = 0; i < kOrderNames.size(); ++i)
    if (kOrderNames[i] == name) return static_cast<SendOrder>(i);
  throw Error("unknown order '" + name + "' (expected backward or priority)");
}

std::string algorithm_name(AllreduceAlgorithm a) { return kAlgorithmNames.at(static_cast<size_t>(a)); }

AllreduceAlgorithm parse_algorithm(const std::string& name) {
  for (size_t i = 0; i < kAlgorithmNames.size(); ++i)
    if (kAlgorithmNames[i] == name) return static_cast<AllreduceAlgorithm>(i);
  throw Error("unknown all-reduce algorithm '" + name + "' (expected ring, halving_doubling, two_level or auto)");
}

const std::vector<std::string>& CollectiveOptions::keys() {
  static const std::vector<std::string> k = {"allreduce",      "fusion",           "spread_blocks",
                                             "ranks_per_host", "host_bandwidth_gbps", "host_latency_us"};
  return k;
}

const std::vector<std::string>& DistConfig::keys() {
  static const std::vector<std::string> k = {"scheme", "wfbp", "order", "block_bytes", "bucket_bytes", "bandwidth_gbps",
                                             "latency_us", "timeout_s", "host_staging", "gemm_gflops", "plan_file",
                                             // compression
                                             "wire", "lowrank", "lowrank_rank", "compression", "compression_min_rank"};
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = k;
    v.insert(v.end(), CollectiveOptions::keys().begin(), CollectiveOptions::keys().end());
    return v;
  }();
  return all;
}

namespace {
int64_t float_multiple(const ConfigNode& node, const std::string& key, int64_t def) {
  int64_t v = node.get_int(key, def);
  if (v < 4 || v % 4 != 0) node.child(key).fail("expected a positive multiple of 4 bytes (whole floats)");
  return v;
}

double positive(const ConfigNode& node, const std::string& key) {
  double v = node.get_double(key);
  if (!(v > 0)) node.child(key).fail("expected a positive number");
  return v;
}
CollectiveOptions parse_collective(const ConfigNode& node) {
  CollectiveOptions o;
  o.planner_chooses = !node.has("allreduce") && !node.has("fusion") && !node.has("spread_blocks");
  o.allreduce = parse_algorithm(node.get_choice("allreduce", kAlgorithmNames, algorithm_name(o.allreduce)));
  o.fusion_auto = node.get_choice("fusion", {"fixed", "auto"}, "fixed") == "auto";
  o.spread_blocks = node.get_bool("spread_blocks", o.spread_blocks);
  o.ranks_per_host = static_cast<int>(node.get_int("ranks_per_host", o.ranks_per_host));
  if (o.ranks_per_host < 1) node.child("ranks_per_host").fail("expected a positive number of ranks");
  if (node.has("host_bandwidth_gbps")) o.host_bandwidth_gbps = positive(node, "host_bandwidth_gbps");
  if (node.has("host_latency_us")) {
    o.host_latency_us = node.get_double("host_latency_us");
    if (!(o.host_latency_us >= 0)) node.child("host_latency_us").fail("expected a non-negative number");
  }
  return o;
}
}  // namespace

DistConfig DistConfig::parse(const ConfigNode& node) {
  if (!node.is_map()) node.fail("expected a map of dist settings");
  node.check_keys(keys());
  DistConfig c;
  c.scheme = parse_scheme_choice(node.get_choice("scheme", kChoiceNames, choice_name(c.scheme)));
  c.wfbp = node.get_bool("wfbp", c.wfbp);
  c.order = parse_send_order(node.get_choice("order", kOrderNames, order_name(c.order)));
  c.block_bytes = float_multiple(node, "block_bytes", c.block_bytes);
  c.bucket_bytes = float_multiple(node, "bucket_bytes", c.bucket_bytes);
  if (node.has("bandwidth_gbps")) c.bandwidth_gbps = positive(node, "bandwidth_gbps");
  if (node.has("latency_us")) {
    c.latency_us = node.get_double("latency_us");
    if (!(*c.latency_us >= 0)) node.child("latency_us").fail("expected a non-negative number");
  }
  if (node.has("timeout_s")) c.timeout_s = positive(node, "timeout_s");
  if (node.has("gemm_gflops")) c.gemm_gflops = positive(node, "gemm_gflops");
  c.plan_file = node.get_string("plan_file", c.plan_file);
  if (!c.plan_file.empty() && c.scheme != SchemeChoice::hybrid)
    node.child("plan_file").fail("a plan file pins the hybrid planner's choices; dist.scheme is '" +
                                 choice_name(c.scheme) + "' (set it to hybrid)");
  c.host_staging = node.get_bool("host_staging", c.host_staging);
  c.collective = parse_collective(node);

  c.wire = parse_wire(node.get_choice("wire", {"fp32", "bf16"}, wire_name(c.wire)));
  c.lowrank = node.get_bool("lowrank", c.lowrank);
  if (c.lowrank && c.scheme != SchemeChoice::hybrid)
    node.child("lowrank").fail("low-rank compression is a per-layer choice of the hybrid planner; dist.scheme is '" +
                               choice_name(c.scheme) + "' (set it to hybrid)");
  c.lowrank_rank = static_cast<int>(node.get_int("lowrank_rank", c.lowrank_rank));
  if (c.lowrank_rank < 1) node.child("lowrank_rank").fail("expected a rank of at least 1");
  const std::string compression = node.get_choice("compression", kCompressionNames, "off");
  c.compression = static_cast<Compression>(
      std::find(kCompressionNames.begin(), kCompressionNames.end(), compression) - kCompressionNames.begin());
  c.compression_min_rank = static_cast<int>(node.get_int("compression_min_rank", c.compression_min_rank));
  if (c.compression_min_rank < 1) node.child("compression_min_rank").fail("expected a rank of at least 1");
  if (node.has("compression_min_rank") && c.compression != Compression::automatic)
    node.child("compression_min_rank").fail("the accuracy budget of dist.compression auto; dist.compression is '" +
                                            compression + "'");
  if (c.compression != Compression::off) {
    for (const char* key : {"wire", "lowrank"})
      if (node.has(key))
        node.child(key).fail(std::string("dist.compression ") + compression +
                             (c.compression == Compression::lossless ? " keeps fp32 on the wire and no low-rank"
                                                                     : " chooses the wire and low-rank per layer") +
                             "; remove dist." + key + " (or set dist.compression: off)");
    if (c.compression == Compression::automatic && c.scheme != SchemeChoice::hybrid)
      node.child("compression").fail("auto is a per-layer choice of the hybrid planner; dist.scheme is '" +
                                     choice_name(c.scheme) + "' (set it to hybrid)");
  }
  return c;
}

}  // namespace poseidon::dist
