// NCCL's communicator set up over MPI, and a bucket's range summed or
// averaged on the GPUs.
#include "dist/runtime/nccl_transport.h"

#include <algorithm>
#include <set>
#include <string>

namespace poseidon::dist {

std::unique_ptr<NcclTransport> NcclTransport::connect(const World& world, Net& gpu_net) {
  const Comm comm(world);
  constexpr int kIdentity = 64;
  const std::string mine = GpuAllReduce::gpu_identity(gpu_net.device());
  std::vector<char> padded(kIdentity, 0), identities(static_cast<size_t>(comm.size()) * kIdentity, 0);
  std::copy_n(mine.begin(), std::min<size_t>(mine.size(), kIdentity - 1), padded.begin());
  POSEIDON_MPI(MPI_Allgather(padded.data(), kIdentity, MPI_CHAR, identities.data(), kIdentity, MPI_CHAR,
                             comm.handle()));
  std::set<std::string> distinct;
  for (int r = 0; r < comm.size(); ++r) distinct.insert(std::string(identities.data() + kIdentity * r));
  if (static_cast<int>(distinct.size()) < comm.size()) return nullptr;
  std::vector<char> id = comm.rank() == 0 ? GpuAllReduce::unique_id() : std::vector<char>();
  int bytes = static_cast<int>(id.size());
  POSEIDON_MPI(MPI_Bcast(&bytes, 1, MPI_INT, 0, comm.handle()));
  id.resize(bytes);
  POSEIDON_MPI(MPI_Bcast(id.data(), bytes, MPI_CHAR, 0, comm.handle()));
  return std::make_unique<NcclTransport>(gpu_net, id, comm.size(), comm.rank());
}

NcclTransport::NcclTransport(Net& gpu_net, const std::vector<char>& id, int ranks, int rank)
    : gpu_net_(gpu_net), all_reduce_(gpu_net.device(), id, ranks, rank) {}

void NcclTransport::sum_to_host(InFlight& in_flight, int64_t begin, int64_t count, float* host, Exchange& owner,
                                int slot) {
  in_flight.post_polled(
      all_reduce_.sum_to_host(gpu_net_.flat_grads().data() + begin, host, static_cast<size_t>(count)), owner, slot);
}

void NcclTransport::mean_on_device(InFlight& in_flight, int64_t begin, int64_t count, Wire wire, int64_t wire_slot,
                                   Exchange& owner, int slot) {
  uint16_t* wire_buffer = nullptr;
  if (wire == Wire::bf16) {
    POSEIDON_CHECK(wire_slot >= 0 && wire_slot + count <= wire_slices_.total())
        << "bf16 slot " << wire_slot << " + " << count << " beyond the reserved " << wire_slices_.total();
    wire_buffer = all_reduce_.wire_buffer(static_cast<size_t>(wire_slices_.total())) + wire_slot;
  }
  in_flight.post_polled(
      all_reduce_.mean_in_place(gpu_net_.flat_grads().data() + begin, static_cast<size_t>(count), wire_buffer), owner,
      slot);
}

}  // namespace poseidon::dist
