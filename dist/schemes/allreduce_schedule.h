// Each rank's part of an all-reduce bucket, as the list of steps it takes:
// in each step it may send a range of the bucket to one rank and receive a
// range from another (tagged by the step, the same on both sides), then add
// what it received into its own range (the sum times `scale`, which is 1/P
// on a range's last sum: the average) or keep it in place. Every element's
// final value is summed by one rank, in one order, and copied to the rest, so
// replicas stay bitwise identical. The algorithms (see dist/plan/collective_costs.h for
// their costs):
//  - ring: P - 1 steps of reduce-scatter to the right neighbour, P - 1 of
//    all-gather;
//  - halving_doubling: with P' the largest power of two <= P, rank P' + i
//    first hands its bucket to rank i; the first P' ranks then halve the range
//    with partners at distance 1, 2, 4, ... (the rank with that bit clear
//    keeps the lower half), double it back in reverse, and rank i returns the
//    result to P' + i;
//  - two_level: on hosts of `per_host` consecutive ranks, a ring
//    reduce-scatter inside each host, after which local rank j holds slice
//    (j + 1) mod per_host; that slice halving-doubled between the ranks of
//    local index j on every host; a ring all-gather inside the host.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/plan/dist_config.h"

namespace poseidon::dist {

struct ScheduleStep {
  int tag = 0;
  int send_to = -1;  // -1: nothing sent
  int64_t send_begin = 0, send_count = 0;
  int receive_from = -1;  // -1: nothing received
  int64_t receive_begin = 0, receive_count = 0;
  bool add = false;  // received aside, then added into [receive_begin, + receive_count)
  float scale = 1;
};

// Rank `rank`'s steps for a bucket of `count` floats on `ranks` ranks, in
// order. Throws Error for two_level when `ranks` is not a multiple of
// `per_host`, and for automatic (a plan always holds a concrete algorithm).
std::vector<ScheduleStep> allreduce_schedule(AllreduceAlgorithm algorithm, int64_t count, int ranks, int rank,
                                             int per_host = 1);

}  // namespace poseidon::dist
