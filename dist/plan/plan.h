// CommPlan: what the communication thread does in every iteration, fixed
// before training and identical on every rank (it depends only on the model,
// the config and the number of ranks, never on timing): the learnable
// parameters, the scheme of each, and the sync groups (an all-reduce bucket, one
// PS parameter cut into owned blocks, one SFB layer) in the order they are
// started. Collectives match across ranks only because every rank starts the
// same groups in this same order.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/net.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/planner.h"

namespace poseidon::dist {

struct PlannedParam {
  Param* param = nullptr;
  size_t layer = 0;    // index of its layer in the Net
  int64_t offset = 0;  // into the Net's flat value and gradient buffers
  Scheme scheme = Scheme::ps;
  Wire wire = Wire::fp32;  // of its gradient (ps, allreduce)
  int rank = 0;            // lowrank: of its factors (0: dist.lowrank_rank)
};

// A slice of one parameter served by one rank.
struct PsBlock {
  int64_t begin = 0, count = 0;  // elements, within the parameter
  int owner = 0;
  int id = 0;  // unique over the plan: part of the message tags
};

// The parameters one exchange synchronises together: an all-reduce bucket,
// one PS parameter cut into owned blocks, or one SFB layer's weight and bias.
struct SyncGroup {
  Scheme scheme = Scheme::ps;
  std::vector<size_t> params;   // indices into CommPlan::params, in the order backward reports them
                                // (sfb: the weight, then the bias)
  std::vector<PsBlock> blocks;  // ps: the cut of its one parameter
  int64_t begin = 0, end = 0;   // allreduce: the bucket's range of the flat buffers
  std::string label;            // for messages: its parameters' names
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::ring;  // allreduce: how the bucket is reduced;
                                                            // lowrank: how its factors are
  Wire wire = Wire::fp32;       // ps, allreduce: of the gradients (a bucket holds one wire format)
  int rank = 0;                 // lowrank: of the factors
};

struct CommPlan {
  std::vector<PlannedParam> params;              // learnable parameters, in the order backward reports them
  std::vector<SyncGroup> groups;                 // in start order
  std::vector<std::vector<size_t>> layer_groups;  // per Net layer: the groups holding its parameters
  int world_size = 1;
  Compression compression = Compression::off;  // the policy that chose the wires and ranks
};

// The learnable parameters of `net` in the order Net::backward reports them
// (last layer first; within a layer, declaration order), all with scheme ps.
std::vector<PlannedParam> backward_order(Net& net);

// Groups `params` (schemes already chosen) into sync groups: consecutive all-reduce
// parameters fuse into buckets of at most config.bucket_bytes (a larger
// parameter is a bucket alone; with dist.fusion auto, of the size
// dist/plan/collective_costs.h derives from `link`), each reduced by config's
// algorithm (auto: the cheapest for its size); a PS parameter is cut into
// blocks of config.block_bytes (with dist.spread_blocks, smaller where the
// PS bytes would make fewer blocks than ranks), each owned by the rank with
// the fewest bytes so far (ties: the lowest rank). A low-rank layer is one
// group, as an SFB layer, at its parameter's rank, its factors all-reduced by
// lowrank_algorithm. The collective options are chosen_options' for `world_size`.
CommPlan make_comm_plan(Net& net, std::vector<PlannedParam> params, const DistConfig& config, int world_size,
                        const LinkModel& link = {});

// Whether layer `layer` can synchronise by sufficient factors: an FC layer
// (weight [M, N], optional bias [M]) that runs backward, whose input holds
// batch x N numbers and whose output has a gradient.
bool sfb_applicable(Net& net, size_t layer);

// The plan `config` asks for on `world_size` ranks: `ps` or `allreduce` for
// every parameter; `sfb` for FC layers that allow it and `ps` for the rest;
// `hybrid`: each layer's scheme chosen by the planner for `link`, or as
// `pinned` gives it (by layer index: dist/plan/plan_file.h). Gradients travel in
// config.wire (with dist.compression auto: as the planner chose per layer),
// or as `pinned_wires` gives it per layer. The planner weighs SFB at `batch`
// examples per rank (0: the Net's batch; the simulator's Net holds another).
// A lowrank layer's rank is the planner's, or as `pinned_ranks` gives it,
// else dist.lowrank_rank.
CommPlan plan_for_config(Net& net, const DistConfig& config, int world_size, const LinkModel& link = {},
                         const std::map<size_t, Scheme>* pinned = nullptr,
                         const std::map<size_t, Wire>* pinned_wires = nullptr, int64_t batch = 0,
                         const std::map<size_t, int>* pinned_ranks = nullptr);

// Whether layer `layer` can be compressed to low rank `rank`: its first
// learnable parameter has two or more dimensions, read as a matrix of
// shape[0] rows, and both sides exceed the rank.
bool lowrank_applicable(Net& net, size_t layer, int rank);

// "sfb: fc1, fc2; ps: conv1, conv2": the layers of each scheme, in layer order.
std::string describe_schemes(const CommPlan& plan, Net& net);

// "sfb 1 layer (fc1), ps 3 layers (conv1, conv2, fc2)": layers per scheme,
// counted, named only while that stays short (a terminal line).
std::string count_schemes(const CommPlan& plan, Net& net);

// "12 all-reduce buckets (halving_doubling 9, ring 3), 40 PS blocks, bf16 wire 52 groups,
// low-rank rank 4 x2, compression auto":
// the groups the plan moves and how, so a run's log shows what the dist: keys chose.
std::string describe_groups(const CommPlan& plan);

}  // namespace poseidon::dist
