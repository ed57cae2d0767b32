// MPI start-up, shutdown and checked calls.
#include "dist/runtime/comm.h"

#include <cstdlib>
#include <utility>
#include <vector>

namespace poseidon::dist {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  const std::string s(text, length);
  return s.substr(0, s.find_first_of(",\n"));
}

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS || len <= 0) return "MPI error " + std::to_string(rc);
  return std::string(text, len);
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  std::string name(call);
  throw CommError(name.substr(0, name.find('(')) + " failed: " + mpi_error_string(rc));
}

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

LauncherTasks launcher_tasks() {
  std::vector<const char*> said_by = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
  if (std::getenv("SLURM_PROCID")) said_by.insert(said_by.end(), {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  for (const char* var : said_by) {
    const char* text = std::getenv(var);
    if (!text) continue;
    char* end = nullptr;
    const long tasks = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && tasks > 0) return {static_cast<int>(tasks), var};
  }
  return {};
}

void require_launcher_agrees(int world_size) {
  const LauncherTasks launcher = launcher_tasks();
  if (launcher.tasks == 0 || launcher.tasks == world_size) return;
  throw CommError("the launcher started " + std::to_string(launcher.tasks) + " tasks (" + launcher.variable + "=" +
                  std::to_string(launcher.tasks) + "), but MPI joins " + std::to_string(world_size) +
                  (world_size == 1 ? " (this process alone)" : "") +
                  ": the tasks are not connected through MPI and would each train alone. Under Slurm, start them "
                  "with srun --mpi=pmix (or set MpiDefault=pmix in slurm.conf); else use mpirun -np " +
                  std::to_string(launcher.tasks));
}

World::World(Start start) {
  if (start == Start::when_launched && !launched_by_mpi()) {
    require_launcher_agrees(size_);
    return;
  }
  int initialized = 0;
  POSEIDON_MPI(MPI_Initialized(&initialized));
  POSEIDON_CHECK(!initialized) << "MPI is initialised already: one World per process";
  POSEIDON_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_));
  uses_mpi_ = true;
  POSEIDON_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  POSEIDON_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  POSEIDON_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm host = MPI_COMM_NULL;
  POSEIDON_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host));
  POSEIDON_MPI(MPI_Comm_rank(host, &local_rank_));
  POSEIDON_MPI(MPI_Comm_size(host, &local_size_));
  POSEIDON_MPI(MPI_Comm_free(&host));
  if (thread_level_ < MPI_THREAD_SERIALIZED)
    throw CommError("the MPI library provides thread level " + std::to_string(thread_level_) +
                    "; the communication thread needs at least MPI_THREAD_SERIALIZED");
  require_launcher_agrees(size_);
}

World::~World() {
  if (uses_mpi_) MPI_Finalize();
}

int World::value_of_rank_zero(int value) const {
  if (uses_mpi_) POSEIDON_MPI(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return value;
}

void World::abort(int status) const {
  if (uses_mpi_) MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);
}

Comm::Comm(const World& world) {
  POSEIDON_CHECK(world.uses_mpi()) << "a communicator needs MPI";
  adopt(MPI_COMM_WORLD);
}

Comm::Comm(Comm&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      rank_(other.rank_),
      size_(other.size_),
      max_tag_(other.max_tag_) {}

Comm Comm::duplicate() const {
  Comm copy;
  copy.adopt(comm_);
  return copy;
}

void Comm::adopt(MPI_Comm parent) {
  POSEIDON_MPI(MPI_Comm_dup(parent, &comm_));
  POSEIDON_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  POSEIDON_MPI(MPI_Comm_rank(comm_, &rank_));
  POSEIDON_MPI(MPI_Comm_size(comm_, &size_));
  int* tag_ub = nullptr;
  int found = 0;
  POSEIDON_MPI(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found));
  if (found && tag_ub) max_tag_ = *tag_ub;
}

Comm::~Comm() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

}  // namespace poseidon::dist
