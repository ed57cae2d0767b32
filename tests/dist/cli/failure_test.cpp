// A rank that dies or stops mid-training never leaves the others hanging:
// `kill -9` of one rank ends the job within 30 s with a message naming that
// rank (Open MPI's launcher notices the death), and a stopped rank is named
// by the others' stall inspection after dist.timeout_s, which then end the
// job.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The process whose parent is `parent` and whose environment says it is MPI rank `rank`.
pid_t find_rank(pid_t parent, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::istringstream stat(slurp(entry.path() / "stat"));
    std::string pid, comm, state;
    pid_t ppid = 0;
    stat >> pid >> comm >> state >> ppid;
    if (ppid != parent) continue;
    std::string env = slurp(entry.path() / "environ");
    for (char& c : env)
      if (c == '\0') c = '\n';
    if (env.find("\nOMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n") != std::string::npos ||
        env.rfind("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + "\n", 0) == 0)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

class RankFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    write_idx_dataset(dir.file("train.idx"), dir.file("train_labels.idx"), 64, 10, 5);
    dir.write("model.yaml", R"(name: tiny
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5, stride: 2}
  - {name: relu1, type: relu}
  - {name: fc1, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)");
    config = dir.write("config.yaml", "model: model.yaml\nthreads: 1\ndata:\n  train: {source: idx, images: " +
                                          dir.file("train.idx") + ", labels: " + dir.file("train_labels.idx") +
                                          ", batch_size: 4}\nsolver: {lr: 0.01, max_iter: 100000000}\n"
                                          "train: {display: 1, output_dir: " +
                                          dir.file("out") + "}\n");
  }

  void TearDown() override {
    if (launcher > 0) {
      kill(-launcher, SIGKILL);  // the launcher's process group: whatever is left of the job
      waitpid(launcher, nullptr, 0);
    }
  }

  // Starts `mpirun -np 3 poseidon train` in its own process group; returns once it trains.
  void start(const std::string& extra) {
    const std::string cmd = "exec " + std::string(POSEIDON_MPIEXEC) + " -np 3 " + POSEIDON_BINARY + " train " + config +
                            " --quiet " + extra + " >" + dir.file("stdout") + " 2>" + dir.file("stderr");
    launcher = fork();
    ASSERT_GE(launcher, 0);
    if (launcher == 0) {
      setpgid(0, 0);
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (slurp(dir.file("out/metrics.jsonl")).find("\"train\"") == std::string::npos) {
      ASSERT_LT(Clock::now(), deadline) << "the job did not start training: " << slurp(dir.file("stderr"));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Waits up to `limit` for the launcher to exit; returns its status, or -1 on timeout.
  int wait_for_exit(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(launcher, &status, WNOHANG) == launcher) {
        launcher = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

  TempDir dir;
  std::string config;
  pid_t launcher = -1;
};

TEST_F(RankFailure, KilledRankEndsTheJobNamingIt) {
  start("--set dist.scheme=ps");
  const pid_t victim = find_rank(launcher, 1);
  ASSERT_GT(victim, 0) << "rank 1's process not found";
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  const int status = wait_for_exit(std::chrono::seconds(30));
  ASSERT_NE(status, -1) << "the other ranks were still running 30 s after rank 1 died";
  EXPECT_NE(status, 0);
  EXPECT_NE(slurp(dir.file("stderr")).find("rank 1"), std::string::npos) << slurp(dir.file("stderr"));
}

TEST_F(RankFailure, StoppedRankIsNamedAfterTheTimeout) {
  for (const std::string scheme : {"ps", "allreduce"}) {
    SCOPED_TRACE(scheme);
    std::filesystem::remove_all(dir.file("out"));
    start("--set dist.scheme=" + scheme + " --set dist.timeout_s=3");
    const pid_t victim = find_rank(launcher, 1);
    ASSERT_GT(victim, 0) << "rank 1's process not found";
    ASSERT_EQ(kill(victim, SIGSTOP), 0);
    const int status = wait_for_exit(std::chrono::seconds(30));
    ASSERT_NE(status, -1) << "the other ranks were still running 30 s after rank 1 stopped";
    EXPECT_NE(status, 0);
    const std::string err = slurp(dir.file("stderr"));
    EXPECT_NE(err.find("rank 1 does not answer"), std::string::npos) << err;
    EXPECT_NE(err.find("no progress for 3 s"), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace poseidon::testing
