// The link probe: ping-pong between ranks 0 and 1, the GEMM rate on rank 0,
// and rank 0's figures broadcast to every rank.
#include "dist/runtime/link_probe.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "dist/plan/median_seconds.h"

namespace poseidon::dist {

namespace {
// Waits for a collective asleep, not spinning in a blocking call: on a host
// with more ranks than cores the waiting ranks' polling would take the cores
// the probing ranks need, and the probe would time the scheduler.
void wait_asleep(MPI_Request& request) {
  for (int done = 0;;) {
    POSEIDON_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace

LinkModel measure_link(const World& world, const DistConfig& config, std::optional<double> gemm_gflops,
                       const std::optional<LinkModel>& recorded) {
  LinkModel link;
  Comm comm(world);
  // Rank 0's record decides for every rank (the others may not see its files).
  int reuse = comm.rank() == 0 && recorded ? 1 : 0;
  POSEIDON_MPI(MPI_Bcast(&reuse, 1, MPI_INT, 0, comm.handle()));
  if (reuse) {
    double figures[3] = {0, 0, 0};
    if (comm.rank() == 0) {
      figures[0] = recorded->bandwidth_gbps;
      figures[1] = recorded->latency_us;
      figures[2] = recorded->gemm_gflops;
    }
    POSEIDON_MPI(MPI_Bcast(figures, 3, MPI_DOUBLE, 0, comm.handle()));
    return LinkModel{figures[0], figures[1], figures[2]};
  }
  const bool probe = comm.size() > 1 && (!config.bandwidth_gbps || !config.latency_us);
  double figures[3] = {config.bandwidth_gbps.value_or(link.bandwidth_gbps), config.latency_us.value_or(link.latency_us),
                       0};
  // Every rank is done with its start-up (building and initialising a large
  // net keeps a core busy) before the probe times anything.
  MPI_Request arrived;
  POSEIDON_MPI(MPI_Ibarrier(comm.handle(), &arrived));
  wait_asleep(arrived);
  if (probe && comm.rank() < 2) {
    const int peer = 1 - comm.rank();
    // The median round trip.
    auto round_trip = [&](std::vector<char>& buf, int reps) {
      const int n = static_cast<int>(buf.size());
      return median_seconds(reps, [&] {
        if (comm.rank() == 0) {
          POSEIDON_MPI(MPI_Send(buf.data(), n, MPI_BYTE, peer, 0, comm.handle()));
          POSEIDON_MPI(MPI_Recv(buf.data(), n, MPI_BYTE, peer, 0, comm.handle(), MPI_STATUS_IGNORE));
        } else {
          POSEIDON_MPI(MPI_Recv(buf.data(), n, MPI_BYTE, peer, 0, comm.handle(), MPI_STATUS_IGNORE));
          POSEIDON_MPI(MPI_Send(buf.data(), n, MPI_BYTE, peer, 0, comm.handle()));
        }
      });
    };
    std::vector<char> small(8), large(4 << 20);
    round_trip(small, 10);  // warm-up: connections are made lazily
    const double latency = round_trip(small, 200) / 2;
    round_trip(large, 1);
    const double one_way = round_trip(large, 5) / 2;
    if (!config.latency_us) figures[1] = latency * 1e6;
    if (!config.bandwidth_gbps) figures[0] = large.size() * 8 / std::max(one_way - latency, 1e-9) / 1e9;
  }
  if (comm.rank() == 0)
    figures[2] = gemm_gflops ? *gemm_gflops : config.gemm_gflops ? *config.gemm_gflops : measure_gemm_gflops();
  MPI_Request request;
  POSEIDON_MPI(MPI_Ibcast(figures, 3, MPI_DOUBLE, 0, comm.handle(), &request));
  wait_asleep(request);
  link.bandwidth_gbps = figures[0];
  link.latency_us = figures[1];
  link.gemm_gflops = figures[2];
  return link;
}

}  // namespace poseidon::dist
