// Which GPU each rank of a job trains on. `device: cuda` (no index) means one
// GPU per rank: the rank's place on its host (World::local_rank) picks
// cuda:<local rank>, and a host running more ranks than it has GPUs is an
// error. `device: cuda:N` names the GPU outright, so that ranks may share one
// on purpose (two ranks on cuda:0 of a one-GPU machine, as tools/gpu_check.sh
// runs them); they then exchange through the host (NCCL needs a GPU per rank).
#pragma once

#include <string>

#include "core/device.h"
#include "dist/runtime/comm.h"

namespace poseidon::dist {

// The device of the rank at `local_rank` of `local_size` ranks on host `host`
// that sees `visible_gpus` GPUs, for a config asking for `asked` (with its
// index written out when `index_given`). Throws an Error saying what to
// change when the host has too few GPUs.
Device rank_device(const Device& asked, bool index_given, int local_rank, int local_size, int visible_gpus,
                   const std::string& host);

// The same for this process of `world`, on this host's GPUs.
Device rank_device(const World& world, const Device& asked, bool index_given);

}  // namespace poseidon::dist
