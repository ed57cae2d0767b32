// dist/ is everything that crosses the network: this header starts MPI and
// checks its calls. The same binary runs alone (no launcher: rank 0 of 1 and
// MPI is never initialised) and under `mpirun -np N` or `srun` (detected from
// the launcher's environment). Every MPI call goes through POSEIDON_MPI, which
// turns a failure into an exception naming the call and MPI's own message.
#pragma once

#include <mpi.h>

#include <string>

#include "core/error.h"

namespace poseidon::dist {

// An MPI call failed, or a transfer stalled or lost its peer.
class CommError : public Error {
 public:
  using Error::Error;
};

// MPI's text for an error code.
std::string mpi_error_string(int rc);

// The MPI library's name and version ("Open MPI v4.1.4"); callable before
// MPI is initialised, or when it never is.
std::string mpi_library_version();

// Throws CommError("<call> failed: <MPI error string>") unless rc is MPI_SUCCESS.
void check_mpi(int rc, const char* call);

}  // namespace poseidon::dist

#define POSEIDON_MPI(call) ::poseidon::dist::check_mpi((call), #call)

namespace poseidon::dist {

// True when an MPI launcher (Open MPI's mpirun, a PMI or PMIx launcher such
// as srun) started this process.
bool launched_by_mpi();

// The number of tasks the launcher that started this process says the job
// has, and the variable that says so: Open MPI's OMPI_COMM_WORLD_SIZE, else
// PMI_SIZE, else, for a task srun started (SLURM_PROCID set),
// SLURM_STEP_NUM_TASKS or SLURM_NTASKS. Zero tasks when none says.
struct LauncherTasks {
  int tasks = 0;
  std::string variable;
};
LauncherTasks launcher_tasks();

// Throws CommError when the launcher's task count disagrees with MPI's world
// size, naming the fix: `srun -n 2` without an MPI plug-in (Slurm's own
// default, --mpi=none) starts two unconnected processes that would each
// train alone into the same output directory.
void require_launcher_agrees(int world_size);

// The process group. Under a launcher it initialises MPI (requesting
// MPI_THREAD_MULTIPLE; at least MPI_THREAD_SERIALIZED is required, since one
// communication thread makes the calls) and finalises it when destroyed.
// One World per process. `always` initialises MPI even without a launcher
// (a singleton job of one rank), for tests of the MPI path.
class World {
 public:
  enum class Start { when_launched, always };
  explicit World(Start start = Start::when_launched);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This rank's place among the ranks on its own host (MPI's shared-memory
  // split of the job), and how many ranks that host runs: the local rank
  // picks the host's GPU (dist/runtime/device_choice.h). 0 of 1 without MPI.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  bool uses_mpi() const { return uses_mpi_; }
  int thread_level() const { return thread_level_; }  // MPI_THREAD_*, as provided

  // Rank 0's `value`, on every rank (collective: every rank calls it, in the
  // same order); `value` itself without MPI. For choices a process makes by
  // measuring, which the ranks of a job must make alike.
  int value_of_rank_zero(int value) const;

  // Ends every rank of the job (MPI_Abort); alone it just exits.
  [[noreturn]] void abort(int status) const;

 private:
  bool uses_mpi_ = false;
  int rank_ = 0, size_ = 1;
  int local_rank_ = 0, local_size_ = 1;
  int thread_level_ = 0;
};

// A private communicator (duplicated from MPI_COMM_WORLD) whose errors are
// returned, not fatal, so that POSEIDON_MPI can report them.
class Comm {
 public:
  explicit Comm(const World& world);
  Comm(Comm&& other) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  Comm& operator=(Comm&&) = delete;
  ~Comm();

  // A new communicator over the same ranks: its collectives never match
  // another communicator's, whatever order they are issued in. Collective:
  // every rank must call it, in the same order.
  Comm duplicate() const;

  MPI_Comm handle() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int max_tag() const { return max_tag_; }

 private:
  Comm() = default;
  void adopt(MPI_Comm parent);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int max_tag_ = 32767;
};

}  // namespace poseidon::dist
