// A launcher whose task count disagrees with MPI's world size (srun -n 2
// where the site's default is --mpi=none: two unconnected processes that
// would each train alone into one output directory) stops the process
// before any work, naming the fix; a count that agrees trains.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// Sets environment variables for the child processes of one test.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      names_.push_back(name);
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    for (const char* name : names_) unsetenv(name);
  }

 private:
  std::vector<const char*> names_;
};

std::string write_config(const TempDir& d) {
  d.write("model.yaml", R"(name: tiny
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)");
  return d.write("config.yaml", "model: model.yaml\nthreads: 1\ndata:\n  train: {source: synthetic, shape: [6], "
                                "num_classes: 3, size: 8, batch_size: 4}\nsolver: {lr: 0.1, max_iter: 1}\n"
                                "train: {output_dir: " +
                                    d.file("out") + "}\n");
}

TEST(LauncherCheck, SrunTasksWithoutMpiStopBeforeAnyWork) {
  TempDir d;
  const std::string config = write_config(d);
  ScopedEnv slurm({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NTASKS", "2"}});
  CliResult r = run_poseidon("train " + config + " --quiet");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the launcher started 2 tasks (SLURM_STEP_NUM_TASKS=2), but MPI joins 1"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("srun --mpi=pmix"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d.file("out"))) << "the output directory was made: work had started";
}

TEST(LauncherCheck, AgreeingTaskCountTrains) {
  TempDir d;
  const std::string config = write_config(d);
  ScopedEnv slurm({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_NTASKS", "4"}});
  CliResult r = run_poseidon("train " + config + " --quiet");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(d.file("out/final.safetensors")));
}

}  // namespace
}  // namespace poseidon::testing
