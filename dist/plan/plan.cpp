// Units of the communication plan (all-reduce buckets, owned PS blocks, SFB
// layers) and the plan a config asks for.
#include "dist/plan/plan.h"

#include <algorithm>
#include <map>

#include "dist/plan/collective_costs.h"
#include "dist/plan/compression_plan.h"

namespace poseidon::dist {

std::vector<PlannedParam> backward_order(Net& net) {
  std::vector<PlannedParam> out;
  const float* base = net.flat_grads().data();
  for (size_t i = net.num_layers(); i-- > 0;)
    for (Param& p : net.layer(i).params())
      if (p.learnable) out.push_back(PlannedParam{&p, i, p.grad.data() - base, Scheme::ps});
  return out;
}

namespace {

// Appends `item` to a list written "a, b, c".
void append(std::string& list, const std::string& item, const char* separator = ", ") {
  if (!list.empty()) list += separator;
  list += item;
}

void add_label(SyncGroup& u, const std::string& name) { append(u.label, name); }

struct Buckets {
  CommPlan& plan;
  int64_t limit;
  bool open = false;

  void add(size_t index) {
    const PlannedParam& p = plan.params[index];
    const int64_t begin = p.offset, end = p.offset + p.param->value.numel();
    if (open) {
      SyncGroup& u = plan.groups.back();
      const int64_t lo = std::min(u.begin, begin), hi = std::max(u.end, end);
      if ((hi - lo) * 4 <= limit && u.wire == p.wire) {
        u.begin = lo;
        u.end = hi;
        u.params.push_back(index);
        add_label(u, p.param->name);
        return;
      }
    }
    SyncGroup u;
    u.scheme = Scheme::allreduce;
    u.wire = p.wire;
    u.params = {index};
    u.begin = begin;
    u.end = end;
    add_label(u, p.param->name);
    plan.groups.push_back(std::move(u));
    open = true;
  }
};

}  // namespace

CommPlan make_comm_plan(Net& net, std::vector<PlannedParam> params, const DistConfig& configured, int world_size,
                        const LinkModel& link) {
  POSEIDON_CHECK(world_size >= 1) << world_size;
  const DistConfig config = chosen_config(configured, world_size);
  CommPlan plan;
  plan.world_size = world_size;
  plan.compression = config.compression;
  plan.params = std::move(params);
  plan.layer_groups.assign(net.num_layers(), {});
  Buckets buckets{plan, bucket_bytes_for(config.bucket_bytes, world_size, link, config.collective)};
  std::vector<int64_t> served(world_size, 0);  // bytes owned so far, per rank
  int next_block_id = 0;
  int64_t ps_bytes = 0;
  for (const PlannedParam& p : plan.params)
    if (p.scheme == Scheme::ps) ps_bytes += p.param->value.numel() * 4;
  const int64_t block_elems = block_bytes_for(config.block_bytes, ps_bytes, world_size, config.collective) / 4;
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const PlannedParam& p = plan.params[i];
    if (p.scheme == Scheme::allreduce) {
      buckets.add(i);
      continue;
    }
    buckets.open = false;
    if (p.scheme == Scheme::sfb || p.scheme == Scheme::lowrank) {
      POSEIDON_CHECK(p.scheme != Scheme::sfb || sfb_applicable(net, p.layer))
          << p.param->name << " cannot use sufficient factors";
      const int rank = p.rank > 0 ? p.rank : config.lowrank_rank;
      POSEIDON_CHECK(p.scheme != Scheme::lowrank || lowrank_applicable(net, p.layer, rank))
          << p.param->name << " cannot be compressed to rank " << rank;
      if (plan.groups.empty() || plan.groups.back().scheme != p.scheme ||
          plan.params[plan.groups.back().params[0]].layer != p.layer) {
        SyncGroup u;
        u.scheme = p.scheme;
        if (p.scheme == Scheme::lowrank) u.rank = rank;
        plan.groups.push_back(std::move(u));
      }
      plan.groups.back().params.push_back(i);
      add_label(plan.groups.back(), p.param->name);
      continue;
    }
    SyncGroup u;
    u.scheme = Scheme::ps;
    u.wire = p.wire;
    u.params = {i};
    u.label = p.param->name;
    const int64_t n = p.param->value.numel();
    for (int64_t begin = 0; begin < n; begin += block_elems) {
      PsBlock b;
      b.begin = begin;
      b.count = std::min(block_elems, n - begin);
      b.owner = static_cast<int>(std::min_element(served.begin(), served.end()) - served.begin());
      b.id = next_block_id++;
      served[b.owner] += b.count * 4;
      u.blocks.push_back(b);
    }
    plan.groups.push_back(std::move(u));
  }
  for (SyncGroup& u : plan.groups) {
    if (u.scheme == Scheme::allreduce)
      u.algorithm = choose_algorithm(static_cast<double>(u.end - u.begin) * static_cast<double>(wire_bytes(u.wire)) / 4,
                                     world_size, link, config.collective);
    if (u.scheme == Scheme::lowrank) {
      const Param& w = *plan.params[u.params[0]].param;
      const int64_t rows = w.shape[0], cols = w.value.numel() / rows;
      int64_t others = 0;
      for (size_t k = 1; k < u.params.size(); ++k) others += plan.params[u.params[k]].param->value.numel();
      u.algorithm = lowrank_algorithm(rows, cols, others, u.rank, world_size, link, config.collective);
    }
  }
  for (size_t u = 0; u < plan.groups.size(); ++u)
    for (size_t i : plan.groups[u].params) {
      auto& lu = plan.layer_groups[plan.params[i].layer];
      if (lu.empty() || lu.back() != u) lu.push_back(u);
    }
  return plan;
}

bool sfb_applicable(Net& net, size_t layer) {
  const Layer& l = net.layer(layer);
  const auto& params = l.params();
  if (l.type() != "fc" || params.empty() || params.size() > 2 || !net.runs_backward(layer)) return false;
  const Param& w = params[0];
  if (!w.learnable || w.shape.size() != 2) return false;
  if (params.size() == 2 && (!params[1].learnable || params[1].shape != Shape{w.shape[0]})) return false;
  const Blob& out = net.blob(l.outputs()[0]);
  return out.grad.defined() && net.blob(l.inputs()[0]).value.numel() == net.batch() * w.shape[1];
}

bool lowrank_applicable(Net& net, size_t layer, int rank) {
  const Layer& l = net.layer(layer);
  if (l.params().empty() || !net.runs_backward(layer)) return false;
  const Param& w = l.params()[0];
  if (!w.learnable || w.shape.size() < 2) return false;
  const int64_t rows = w.shape[0], cols = shape_numel(w.shape) / rows;
  return rows > rank && cols > rank;
}

CommPlan plan_for_config(Net& net, const DistConfig& config, int world_size, const LinkModel& link,
                         const std::map<size_t, Scheme>* pinned, const std::map<size_t, Wire>* pinned_wires,
                         int64_t batch, const std::map<size_t, int>* pinned_ranks) {
  std::vector<PlannedParam> params = backward_order(net);
  std::map<size_t, Scheme> chosen;  // hybrid: by layer
  std::map<size_t, Wire> chosen_wires;
  std::map<size_t, int> chosen_ranks;
  if (config.scheme == SchemeChoice::hybrid && pinned) chosen = *pinned;
  if (config.scheme == SchemeChoice::hybrid && !pinned) {
    std::vector<LayerPlan> layers = plan_layers(net, batch > 0 ? batch : net.batch(), world_size, link, config);
    plan_compression(layers, net, world_size, link, config);
    for (const LayerPlan& lp : layers) {
      chosen[lp.layer] = lp.scheme;
      chosen_wires[lp.layer] = lp.wire;
      chosen_ranks[lp.layer] = lp.rank;
    }
  }
  const Wire wire = config.compression == Compression::off ? config.wire : Wire::fp32;
  for (PlannedParam& p : params) {
    p.wire = chosen_wires.count(p.layer) ? chosen_wires.at(p.layer) : wire;
    p.rank = chosen_ranks.count(p.layer) ? chosen_ranks.at(p.layer) : 0;
    if (pinned_wires && pinned_wires->count(p.layer)) p.wire = pinned_wires->at(p.layer);
    if (pinned_ranks && pinned_ranks->count(p.layer)) p.rank = pinned_ranks->at(p.layer);
    if (config.scheme == SchemeChoice::hybrid)
      p.scheme = chosen.at(p.layer);
    else if (config.scheme == SchemeChoice::allreduce)
      p.scheme = Scheme::allreduce;
    else if (config.scheme == SchemeChoice::sfb && sfb_applicable(net, p.layer))
      p.scheme = Scheme::sfb;
    else
      p.scheme = Scheme::ps;
  }
  return make_comm_plan(net, std::move(params), config, world_size, link);
}

std::string describe_schemes(const CommPlan& plan, Net& net) {
  std::map<size_t, Scheme> by_layer;
  for (const PlannedParam& p : plan.params) by_layer[p.layer] = p.scheme;
  std::string out;
  for (Scheme scheme : {Scheme::sfb, Scheme::ps, Scheme::allreduce, Scheme::lowrank}) {
    std::string names;
    for (const auto& [layer, s] : by_layer)
      if (s == scheme) append(names, net.layer(layer).name());
    if (!names.empty()) append(out, scheme_name(scheme) + ": " + names, "; ");
  }
  return out;
}

std::string count_schemes(const CommPlan& plan, Net& net) {
  // A kind's layers are named while the names are short, else only counted:
  // the full table is `poseidon plan`'s.
  constexpr size_t kNamesUpTo = 32;
  std::map<size_t, Scheme> by_layer;
  for (const PlannedParam& p : plan.params) by_layer[p.layer] = p.scheme;
  std::string out;
  for (Scheme scheme : {Scheme::sfb, Scheme::ps, Scheme::allreduce, Scheme::lowrank}) {
    std::string names;
    int count = 0;
    for (const auto& [layer, s] : by_layer)
      if (s == scheme) {
        append(names, net.layer(layer).name());
        ++count;
      }
    if (count == 0) continue;
    std::string item = scheme_name(scheme) + " " + std::to_string(count) + (count == 1 ? " layer" : " layers");
    if (names.size() <= kNamesUpTo) item += " (" + names + ")";
    append(out, item);
  }
  return out;
}

std::string describe_groups(const CommPlan& plan) {
  int buckets = 0, blocks = 0, bf16 = 0;
  std::map<std::string, int> algorithms;
  std::map<int, int> lowrank_ranks;
  for (const SyncGroup& group : plan.groups) {
    if (group.scheme == Scheme::lowrank) ++lowrank_ranks[group.rank];
    if (group.scheme == Scheme::allreduce) {
      ++buckets;
      ++algorithms[algorithm_name(group.algorithm)];
    }
    if (group.scheme == Scheme::ps) blocks += static_cast<int>(group.blocks.size());
    if ((group.scheme == Scheme::allreduce || group.scheme == Scheme::ps) && group.wire == Wire::bf16) ++bf16;
  }
  std::string out;
  if (buckets > 0) {
    std::string kinds;
    for (const auto& [name, count] : algorithms) append(kinds, name + " " + std::to_string(count));
    append(out, std::to_string(buckets) + (buckets == 1 ? " all-reduce bucket (" : " all-reduce buckets (") + kinds + ")");
  }
  if (blocks > 0) append(out, std::to_string(blocks) + (blocks == 1 ? " PS block" : " PS blocks"));
  if (bf16 > 0) append(out, "bf16 wire " + std::to_string(bf16) + (bf16 == 1 ? " group" : " groups"));
  std::string ranks;
  for (const auto& [rank, count] : lowrank_ranks) append(ranks, "rank " + std::to_string(rank) + " x" + std::to_string(count));
  if (!ranks.empty()) append(out, "low-rank " + ranks);
  if (plan.compression != Compression::off) append(out, "compression " + compression_name(plan.compression));
  return out;
}

}  // namespace poseidon::dist
