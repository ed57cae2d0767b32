// How well MPI over TCP fills the emulated cluster's links in three
// traffic patterns, each rank moving the same bytes: a ring (one connection
// per link and direction: what all-reduce and SFB's rings do), a concurrent
// all-to-all (every rank sending to all others at once: the parameter
// server's pushes and new values) and pairwise rounds (round k: each rank to
// the k-th next, all waiting for the round). Each time is set against the
// link time of its bytes at the TCP payload rate, the time the simulator
// (dist/sim/simulate.h) gives such traffic. Ranks wait as the scheduler's
// communication thread does, testing every 50 us and sleeping between, or
// (SPIN) in MPI_Waitall, which spins: how much eight spinning ranks on this
// machine's two cores slow the kernel's forwarding between the emulated
// hosts. Run by bench/link_patterns.sh.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

bool spin = false;

void wait_all(int n, MPI_Request* requests) {
  if (spin) {
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    return;
  }
  for (int done = 0; MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE), !done;)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void ring(std::vector<char>& out, std::vector<char>& in, long bytes, int rank, int ranks) {
  // The same bytes per rank as the others: (ranks - 1) pieces, one after another.
  MPI_Request q[2];
  for (int k = 1; k < ranks; ++k) {
    MPI_Isend(out.data() + k * bytes, bytes, MPI_CHAR, (rank + 1) % ranks, k, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(in.data() + k * bytes, bytes, MPI_CHAR, (rank + ranks - 1) % ranks, k, MPI_COMM_WORLD, &q[1]);
    wait_all(2, q);
  }
}

void all_to_all(std::vector<char>& out, std::vector<char>& in, long bytes, int rank, int ranks) {
  std::vector<MPI_Request> q(2 * (ranks - 1));
  for (int k = 1; k < ranks; ++k) {  // sends first: see the ring above
    const int to = (rank + k) % ranks, from = (rank + ranks - k) % ranks;
    MPI_Isend(out.data() + to * bytes, bytes, MPI_CHAR, to, 0, MPI_COMM_WORLD, &q[2 * (k - 1)]);
    MPI_Irecv(in.data() + from * bytes, bytes, MPI_CHAR, from, 0, MPI_COMM_WORLD, &q[2 * (k - 1) + 1]);
  }
  wait_all(static_cast<int>(q.size()), q.data());
}

void pairwise(std::vector<char>& out, std::vector<char>& in, long bytes, int rank, int ranks) {
  MPI_Request q[2];
  for (int k = 1; k < ranks; ++k) {
    const int to = (rank + k) % ranks, from = (rank + ranks - k) % ranks;
    MPI_Isend(out.data() + to * bytes, bytes, MPI_CHAR, to, 0, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(in.data() + from * bytes, bytes, MPI_CHAR, from, 0, MPI_COMM_WORLD, &q[1]);
    wait_all(2, q);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc < 4 || argc > 5 || (argc == 5 && std::strcmp(argv[4], "spin") != 0) || ranks < 2) {
    if (rank == 0) std::fprintf(stderr, "usage: link_patterns BYTES_PER_PEER PAYLOAD_GBPS ROUNDS [spin] (2 ranks or more)\n");
    MPI_Finalize();
    return 2;
  }
  const long bytes = std::atol(argv[1]);
  const double payload_gbps = std::atof(argv[2]);
  const int rounds = std::atoi(argv[3]);
  spin = argc == 5;
  std::vector<char> out(static_cast<size_t>(bytes) * ranks, static_cast<char>(rank)), in(out.size());
  using Pattern = void (*)(std::vector<char>&, std::vector<char>&, long, int, int);
  const std::pair<const char*, Pattern> patterns[] = {{"ring", ring}, {"all-to-all", all_to_all}, {"pairwise", pairwise}};
  const double link_s = (ranks - 1) * bytes * 8.0 / (payload_gbps * 1e9);
  for (int round = 0; round < rounds; ++round)
    for (const auto& [name, run] : patterns) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      run(out, in, bytes, rank, ranks);
      double mine = MPI_Wtime() - start, slowest = 0;
      MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0)
        std::printf("{\"round\": %d, \"pattern\": \"%s\", \"ranks\": %d, \"seconds\": %.6f, \"link_seconds\": %.6f}\n",
                    round, name, ranks, slowest, link_s);
      std::fflush(stdout);
    }
  MPI_Finalize();
  return 0;
}
