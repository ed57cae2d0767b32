// One GPU per rank (see device_choice.h).
#include "dist/runtime/device_choice.h"

#include <unistd.h>

#include "core/device_memory.h"
#include "core/error.h"

namespace poseidon::dist {

Device rank_device(const Device& asked, bool index_given, int local_rank, int local_size, int visible_gpus,
                   const std::string& host) {
  if (!asked.is_cuda() || index_given || local_size <= 1) return asked;
  if (local_size > visible_gpus)
    throw Error("device: cuda gives each rank a GPU of its own, but host " + host + " runs " +
                std::to_string(local_size) + " ranks and has " + std::to_string(visible_gpus) +
                " GPU(s): start at most " + std::to_string(visible_gpus) +
                " ranks per host (mpirun --map-by ppr:N:node, srun --ntasks-per-node=N), or name one GPU for all of "
                "them to share (device: cuda:0)");
  return Device::cuda(local_rank);
}

Device rank_device(const World& world, const Device& asked, bool index_given) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  return rank_device(asked, index_given, world.local_rank(), world.local_size(), device_memory::cuda_device_count(),
                     host);
}

}  // namespace poseidon::dist
