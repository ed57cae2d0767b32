// DistConfig: the `dist:` section of a training config, which says how
// parameters are synchronised when the job has more than one rank.
//
//   dist:
//     scheme: hybrid        # hybrid | ps | sfb | allreduce
//     wfbp: true            # start each layer's transfer as soon as backward produced it
//     order: backward       # backward | priority (lower layers' blocks first)
//     block_bytes: 4194304  # PS block and priority partition size
//     bucket_bytes: 4194304 # all-reduce fuses small tensors up to this size
//     bandwidth_gbps: 10    # link speed for the planner (omitted: measured)
//     latency_us: 20        # per-message latency for the planner (omitted: measured)
//     gemm_gflops: 50       # SFB rebuild rate for the planner (omitted: measured)
//     plan_file: plan.json  # hybrid: each layer's scheme as `poseidon plan --out` wrote it
//     timeout_s: 300        # a transfer stalled this long stops every rank
//     host_staging: false   # exchange through a host copy of the net (always so
//                           # for a GPU net; on the CPU it runs that path, for tests)
//   collectives at scale (CollectiveOptions; docs/SCALING.md):
//     allreduce: ring       # ring | halving_doubling | two_level | auto (per bucket, by cost)
//     fusion: fixed         # fixed: buckets of bucket_bytes; auto: sized from latency and bandwidth
//     spread_blocks: false  # PS: blocks small enough that every rank serves some
//                           # (none of these three set: the planner chooses them from P,
//                           # dist/plan/collective_costs.h's chosen_options)
//     ranks_per_host: 1     # ranks sharing one host's link (two_level: reduce inside a host first)
//     host_bandwidth_gbps: 200  # between ranks of one host, Gbit/s each way
//   compression (dist/plan/wire.h, dist/schemes/lowrank.h):
//     wire: fp32            # fp32 | bf16: the format of gradients on the wire (PS, all-reduce)
//     lowrank: false        # hybrid: let the planner choose low-rank compression per layer
//     lowrank_rank: 4       # rank r of the low-rank factors
//     compression: off      # off: as wire and lowrank say; lossless: fp32 wire, no low-rank;
//                           # auto: the planner chooses each layer's scheme, wire and rank
//     compression_min_rank: 8  # auto's accuracy budget: the lowest low-rank rank it may choose
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "dist/plan/wire.h"

namespace poseidon::dist {

enum class Scheme { ps, sfb, allreduce, lowrank };
std::string scheme_name(Scheme s);

// What dist.scheme asks for: the planner's choice per layer (hybrid), or one
// scheme for every parameter (sfb: for the FC layers that allow it, ps for the rest).
enum class SchemeChoice { hybrid, ps, sfb, allreduce };
std::string choice_name(SchemeChoice c);
// Throws Error naming the choices for a name that is none of them.
SchemeChoice parse_scheme_choice(const std::string& name);

// The order of the parameter server's sends: as backward reports the
// parameters, or lower layers' blocks first (dist/plan/priority.h).
enum class SendOrder { backward, priority };
std::string order_name(SendOrder o);
SendOrder parse_send_order(const std::string& name);  // throws Error for another name

// How all-reduce buckets are reduced: a ring (2 (P - 1) steps), recursive
// halving-doubling (2 log2 P steps, two more when P is not a power of two),
// two levels (inside each host, then between hosts, then inside again), or
// per bucket whichever the cost model (dist/plan/collective_costs.h) says is fastest.
enum class AllreduceAlgorithm { ring, halving_doubling, two_level, automatic };
std::string algorithm_name(AllreduceAlgorithm a);
AllreduceAlgorithm parse_algorithm(const std::string& name);  // throws Error for another name

// The options of the collectives at large P, grouped apart from the scheme
// choice: the defaults are the small-cluster behaviour.
struct CollectiveOptions {
  AllreduceAlgorithm allreduce = AllreduceAlgorithm::ring;
  bool fusion_auto = false;    // bucket size from latency and bandwidth instead of bucket_bytes
  bool spread_blocks = false;  // PS blocks no larger than the PS bytes / P, so that every rank serves
  int ranks_per_host = 1;      // consecutive ranks share a host (and its link)
  double host_bandwidth_gbps = 200;
  double host_latency_us = 2;
  // None of allreduce, fusion and spread_blocks set: the planner chooses
  // them from the rank count (chosen_options in dist/plan/collective_costs.h).
  bool planner_chooses = false;

  static const std::vector<std::string>& keys();
};

// What the planner may do to the gradients' bytes (docs/COMPRESSION.md):
// off, as dist.wire and dist.lowrank say; lossless, nothing lossy (fp32 on
// the wire, no low-rank); auto, per layer the fastest of PS, SFB and
// all-reduce in fp32 or bf16 and low-rank at a rank no lower than
// compression_min_rank.
enum class Compression { off, lossless, automatic };
std::string compression_name(Compression c);

struct DistConfig {
  SchemeChoice scheme = SchemeChoice::hybrid;
  bool wfbp = true;
  SendOrder order = SendOrder::backward;
  int64_t block_bytes = 4 << 20;
  int64_t bucket_bytes = 4 << 20;
  std::optional<double> bandwidth_gbps;  // Gbit/s
  std::optional<double> latency_us;
  std::optional<double> gemm_gflops;  // the SFB rebuild's rate for the planner (omitted: measured)
  std::string plan_file;              // pins each layer's scheme (dist/plan/plan_file.h); "" : planned here
  double timeout_s = 300;
  bool host_staging = false;
  CollectiveOptions collective;

  // Compression: the gradients' wire format, and low-rank compression.
  Wire wire = Wire::fp32;
  bool lowrank = false;
  int lowrank_rank = 4;
  Compression compression = Compression::off;
  int compression_min_rank = 8;

  static DistConfig parse(const ConfigNode& node);
  static const std::vector<std::string>& keys();
};

}  // namespace poseidon::dist
