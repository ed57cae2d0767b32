// Simulation of the distributed scheduler (`poseidon simulate`): a
// discrete-event model of what Scheduler does on P identical ranks, for
// clusters larger than any machine at hand. It runs the plan training would
// use (plan_for_config on the real Net: the same sync groups, owners, buckets, SFB
// layers and start order) against a per-layer compute profile:
//  - each rank's compute thread runs forward layer by layer, each waiting on
//    its layer's gate (the previous iteration's groups of that layer done),
//    then backward in reverse, each layer's gradients ready at its end;
//  - its communication thread starts groups in plan order as they become
//    ready (WFBP), or all of them after backward, the next forward waiting
//    for all (no WFBP);
//  - its device runs the solver updates, the sums of gradients and the SFB
//    rebuilds, one at a time, each as long as DeviceCosts (dist/sim/device_costs.h)
//    says: the times `train --emulate-compute` waits for them;
//  - every rank has one send and one receive link; a message occupies the
//    sender's send link, then (once sent, a switch buffering it) the
//    receiver's receive link, each for bytes/bandwidth and first come, first
//    served (a receive link in the order sending began), and arrives a
//    latency after it is received;
//  - PS: each rank pushes each block to its owner, which waits for all P,
//    sums the P pushes and updates on its device, and sends the new values
//    to every rank; with order priority, sends leave through the
//    PrioritySends queue the host transport keeps (dist/runtime/host_transport.h);
//  - all-reduce bucket: the steps of its algorithm (dist/plan/collective_costs.h: a ring,
//    2(P-1) steps; halving-doubling, 2 log2 P; two levels), each holding the
//    links for its bytes and a latency, the summing steps followed by their
//    sums, then the update;
//  - with dist.ranks_per_host G, the G consecutive ranks of a host share one
//    send and one receive link; a message between two of them takes the
//    host's own bandwidth and latency instead;
//  - low-rank layer: two ring all-reduces of its factors, 2 (P - 1) steps
//    each, and its GEMMs at the profile's rate;
//    SFB layer: a ring all-gather of the factors, P-1 steps, then the
//    rebuild GEMM at the link's GEMM rate and the update. A collective starts
//    when every rank has started it and holds every rank's links until it ends.
// Message sizes come from the planner's cost functions (ps_cost,
// allreduce_cost, sfb_cost) and the plan's blocks, so the bytes moved are
// the planner's. On one worker there is no scheduler, as in training:
// forward, backward, update.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/plan/dist_config.h"
#include "dist/plan/plan.h"
#include "dist/plan/planner.h"
#include "dist/sim/simulate_profile.h"

namespace poseidon::dist {

struct SimConfig {
  int workers = 1;
  DistConfig dist;     // scheme, wfbp, order, block and bucket sizes
  LinkModel link;      // bandwidth (may be infinite), latency, SFB rebuild GEMM rate
  int iterations = 8;  // simulated; the steady state is measured over the second half
};

struct LinkBusy {
  double send_s = 0, recv_s = 0;  // per iteration
};

struct SimResult {
  int workers = 1;
  double single_s = 0;          // one worker's iteration, no communication
  double iteration_s = 0;       // steady state on `workers` ranks
  double bytes_per_worker = 0;  // sent plus received per iteration, mean over ranks
  std::vector<LinkBusy> links;  // per host link (per rank when each rank has its own)
  std::string schemes;          // describe_schemes of the plan

  // workers * single_s / iteration_s: throughput against one worker.
  double speedup() const { return iteration_s > 0 ? workers * single_s / iteration_s : workers; }
  double efficiency() const { return speedup() / workers; }
  // Share of the iteration a link is busy, averaged over every rank's two links.
  double mean_utilisation() const;
  // The busiest link's share.
  double max_utilisation() const;
};

// The plan training on `workers` ranks of `batch` examples each would run.
// `net` may hold a different batch (shapes are all the plan needs), so
// HybComm's choice is asked at `batch`.
CommPlan simulation_plan(Net& net, const DistConfig& config, int workers, const LinkModel& link, int64_t batch);

// Simulates `config.iterations` iterations of `net` with `profile` (whose
// batch is the examples per rank).
SimResult simulate(Net& net, const ComputeProfile& profile, const SimConfig& config);

}  // namespace poseidon::dist
