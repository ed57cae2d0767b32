// Plan files: what a distributed run planned, written down so that another
// run plans the same. A hybrid plan depends on the model, the batch, the rank
// count and the link figures the start-up probe measured (bandwidth, latency,
// GEMM rate), and those figures move with the machine's load: a layer near
// SFB's break-even can flip between SFB and PS, which changes the numbers a
// run computes. A record fixes them:
//   - training writes one to <output_dir>/plan.json and every checkpoint
//     carries its figures; a later start of the same config (fresh, or
//     --resume) reuses them instead of probing (`train --replan` probes anew);
//   - `poseidon plan --out FILE` writes one, and `dist.plan_file: FILE` pins
//     each layer's scheme to it.
// The file is JSON:
//   {"format": "poseidon-plan-1", "model": "lenet", "workers": 2, "batch": 64,
//    "link": {"bandwidth_gbps": 10, "latency_us": 20, "gemm_gflops": 50},
//    "layers": [{"name": "fc1", "scheme": "sfb"}, ...]}
// `poseidon plan --tune` adds the options it chose, which a pinned run
// takes over its config's:
//    "tuned": {"order": "priority", "block_bytes": 4194304, "bucket_bytes": 4194304,
//              "allreduce": "auto", "fusion": "auto", "spread_blocks": true, "ranks_per_host": 1}
//    "layers": [{"name": "fc1", "scheme": "sfb"}, {"name": "conv1", "scheme": "ps", "wire": "bf16"}, ...]}
// A layer's "wire" (dist/plan/wire.h) is written where it is not fp32; a plan
// file may set it per layer, which then overrides dist.wire. A lowrank
// layer's "rank" (of its factors, as the planner chose it) is written too,
// and pins it; without one the layer takes dist.lowrank_rank:
//    {"name": "fc6", "scheme": "lowrank", "rank": 8}
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/net.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/plan.h"
#include "dist/plan/planner.h"

namespace poseidon::dist {

// The options `poseidon plan --tune` searches, beside each layer's scheme.
struct TunedOptions {
  SendOrder order = SendOrder::backward;
  int64_t block_bytes = 4 << 20, bucket_bytes = 4 << 20;
  CollectiveOptions collective;

  static TunedOptions of(const DistConfig& config);
};

struct PlanRecord {
  std::string model;
  int workers = 0;
  int64_t batch = 0;
  LinkModel link;
  std::vector<std::pair<std::string, Scheme>> layers;  // every layer with learnable parameters, in layer order
  std::optional<TunedOptions> tuned;                   // what `plan --tune` chose
  std::map<std::string, Wire> wires;                   // by layer name: the wire formats pinned per layer
  std::map<std::string, int> ranks;                    // by layer name: the ranks of lowrank layers' factors
};

// Writes the tuned options over `config`'s.
void apply_tuned(const TunedOptions& tuned, DistConfig& config);

// The record of `plan` (made for `net` with `link`).
PlanRecord plan_record(const CommPlan& plan, Net& net, const LinkModel& link);
// The record `plan_layers` gives, for `poseidon plan --out`.
PlanRecord plan_record(const std::vector<LayerPlan>& layers, Net& net, int workers, int64_t batch,
                       const LinkModel& link);

std::string plan_json(const PlanRecord& record);
// Throws Error naming the file (and the key) when it is not a plan file.
PlanRecord read_plan_file(const std::string& path);
// Written to a temporary file and renamed: a reader never sees half of it.
void write_plan_file(const std::string& path, const PlanRecord& record);

// The link figures recorded in a checkpoint's metadata (metadata key
// "dist_link"), and the text to record there.
std::string link_text(const LinkModel& link);
std::optional<LinkModel> parse_link_text(const std::string& text);

// Each layer's scheme as `record` pins it, by layer index of `net`. Throws
// Error naming `path` when a layer with parameters is missing, a name is not
// a layer of the net, or SFB is pinned where it cannot run.
std::map<size_t, Scheme> pinned_schemes(const PlanRecord& record, Net& net, const std::string& path);
// The wire formats `record` pins, by layer index (its layers are checked by pinned_schemes).
std::map<size_t, Wire> pinned_wires(const PlanRecord& record, Net& net);
// The lowrank layers' ranks `record` pins, by layer index. Throws Error
// naming `path` and the layer when a layer cannot be compressed to its rank.
std::map<size_t, int> pinned_ranks(const PlanRecord& record, Net& net, const std::string& path);

}  // namespace poseidon::dist
