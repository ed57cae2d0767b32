// Faults of a running job. Preemption: a SIGTERM to a training process, or
// to one rank of an MPI job, stops every rank at an iteration boundary with
// one complete checkpoint and exit status 0, and --resume continues from it;
// a second signal ends the process at once. A lost rank: tools/elastic_train
// restarts the job on the ranks left from the newest checkpoint, and ends
// with the very numbers of that checkpoint resumed by hand on as many ranks.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/safetensors.h"
#include "tests/dist/cli/mpi_runner.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// A command started in the background (its own process group), its output in files.
class Background {
 public:
  Background(const std::string& command, const TempDir& dir) : out_(dir.file("out")), err_(dir.file("err")) {
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      const std::string line = command + " >" + out_ + " 2>" + err_ + " </dev/null";
      execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && !reaped_) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int wait() {
    int raw = 0;
    waitpid(pid_, &raw, 0);
    reaped_ = true;
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  }
  std::string text(bool errors) const {
    std::stringstream s;
    s << std::ifstream(errors ? err_ : out_).rdbuf();
    return s.str();
  }

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Waits (at most a minute) until `path` holds a training record.
bool wait_for_training(const std::string& path) {
  for (int i = 0; i < 600; ++i) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (line.find("\"type\":\"train\"") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The pids of processes whose command line holds `needle` and runs the poseidon binary itself.
std::vector<pid_t> ranks_running(const std::string& needle) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    for (char& c : args)
      if (c == '\0') c = ' ';
    if (args.rfind(POSEIDON_BINARY, 0) == 0 && args.find(needle) != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

class Preemption : public ::testing::Test {
 protected:
  void SetUp() override {
    config = dir.write("config.yaml",
                       "model: " + std::string(POSEIDON_SOURCE_DIR) + "/models/lenet.yaml\nseed: 2\nthreads: 1\n"
                       "data: {train: {source: synthetic, shape: [1, 28, 28], num_classes: 10, size: 100000, "
                       "batch_size: 16}}\n"
                       "solver: {lr: 0.01, momentum: 0.9, max_iter: 100000}\n"
                       "train: {display: 1, output_dir: " + dir.file("run") + "}\n");
  }
  TempDir dir;
  std::string config;
};

}  // namespace

TEST_F(Preemption, SigtermStopsWithOneCheckpointThatResumes) {
  TempDir logs;
  Background run(std::string(POSEIDON_BINARY) + " train " + config, logs);
  ASSERT_TRUE(wait_for_training(dir.file("run/metrics.jsonl")));
  ASSERT_EQ(kill(ranks_running(config).at(0), SIGTERM), 0);
  ASSERT_EQ(run.wait(), 0) << run.text(true);
  const std::string out = run.text(false) + run.text(true);  // the progress notes go to either
  const size_t at = out.find("stopped at iteration ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(out.find("by SIGTERM"), std::string::npos) << out;
  const int iter = std::stoi(out.substr(at + 21));
  const std::string ckpt = dir.file("run/iter_" + std::to_string(iter) + ".safetensors");
  const SafetensorsFile saved = read_safetensors(ckpt);
  EXPECT_EQ(saved.metadata.at("iteration"), std::to_string(iter));
  EXPECT_FALSE(std::filesystem::exists(dir.file("run/final.safetensors")));

  CliResult resumed = run_poseidon("train " + config + " --quiet --resume " + ckpt + " --set solver.max_iter=" +
                                   std::to_string(iter + 2) + " --set train.output_dir=" + dir.file("resumed"));
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(read_safetensors(dir.file("resumed/final.safetensors")).metadata.at("iteration"),
            std::to_string(iter + 2));
}

TEST_F(Preemption, SigtermToOneRankStopsEveryRankTogether) {
  TempDir logs;
  Background job(std::string(POSEIDON_MPIEXEC) + " -np 2 " + POSEIDON_BINARY + " train " + config +
                     " --set dist.scheme=allreduce",
                 logs);
  ASSERT_TRUE(wait_for_training(dir.file("run/metrics.jsonl")));
  const std::vector<pid_t> ranks = ranks_running(config);
  ASSERT_EQ(ranks.size(), 2u);
  ASSERT_EQ(kill(ranks.back(), SIGTERM), 0);
  ASSERT_EQ(job.wait(), 0) << job.text(true);
  const std::string out = job.text(false) + job.text(true);
  const size_t at = out.find("stopped at iteration ");
  ASSERT_NE(at, std::string::npos) << out;
  const int iter = std::stoi(out.substr(at + 21));
  EXPECT_EQ(read_safetensors(dir.file("run/iter_" + std::to_string(iter) + ".safetensors")).metadata.at("iteration"),
            std::to_string(iter));
  int checkpoints = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir.file("run")))
    checkpoints += f.path().extension() == ".safetensors";
  EXPECT_EQ(checkpoints, 1) << "one complete checkpoint, no other";
}

TEST_F(Preemption, SecondSignalEndsAtOnce) {
  TempDir logs;
  // Iterations of about a second: the second signal comes before the first one's boundary.
  Background run(std::string(POSEIDON_BINARY) + " train " + config + " --set data.train.batch_size=1024", logs);
  ASSERT_TRUE(wait_for_training(dir.file("run/metrics.jsonl")));
  const pid_t pid = ranks_running(config).at(0);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // delivered apart, not merged into one
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(run.wait(), 128 + SIGINT);
}

TEST_F(Preemption, LostRankRestartsOnTheRestAsAResumeByHandWould) {
  dir.write("elastic.yaml", "model: " + std::string(POSEIDON_SOURCE_DIR) +
                                "/models/lenet.yaml\nseed: 6\nthreads: 1\n"
                                "data: {train: {source: synthetic, shape: [1, 28, 28], num_classes: 10, size: 4096, "
                                "batch_size: 16}}\n"
                                "solver: {lr: 0.02, momentum: 0.9, max_iter: 40}\n"
                                "train: {display: 1, snapshot_interval: 5}\ndist: {scheme: hybrid}\n");
  // The launcher's mpirun with the tests' transports, ranks on this machine.
  std::string mpi_args;
  std::istringstream words(POSEIDON_MPIEXEC);
  std::string word;
  words >> word;  // the launcher runs mpirun itself
  while (words >> word) mpi_args += " --mpi-arg " + word;
  TempDir logs;
  Background job(std::string(POSEIDON_SOURCE_DIR) + "/tools/elastic_train --hosts localhost,localhost,localhost" +
                     " --output-dir " + dir.file("elastic") + " --bin " + POSEIDON_BINARY + mpi_args + " -- " +
                     dir.file("elastic.yaml") + " --quiet",
                 logs);
  // Killed once the job is past its second checkpoint.
  bool past = false;
  for (int i = 0; i < 600 && !past; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    past = std::filesystem::exists(dir.file("elastic/iter_10.safetensors"));
  }
  ASSERT_TRUE(past) << logs.file("err");
  const std::vector<pid_t> ranks = ranks_running(dir.file("elastic.yaml"));
  ASSERT_EQ(ranks.size(), 3u);
  ASSERT_EQ(kill(ranks[1], SIGKILL), 0);
  ASSERT_EQ(job.wait(), 0) << job.text(false) << job.text(true);
  const std::string log = job.text(false) + job.text(true);
  const std::string restart = "elastic: restart 1 of 3 on 2 hosts from ";
  const size_t at = log.find(restart);
  ASSERT_NE(at, std::string::npos) << log;
  const std::string checkpoint = log.substr(at + restart.size(), log.find('\n', at) - at - restart.size());
  EXPECT_NE(log.find("elastic: finished on 2 hosts after 1 restarts"), std::string::npos) << log;

  CliResult by_hand = run_mpi(2, "train " + dir.file("elastic.yaml") + " --quiet --resume " + checkpoint +
                                     " --set train.output_dir=" + dir.file("by_hand"));
  ASSERT_EQ(by_hand.status, 0) << by_hand.err;
  const SafetensorsFile a = read_safetensors(dir.file("elastic/final.safetensors"));
  const SafetensorsFile b = read_safetensors(dir.file("by_hand/final.safetensors"));
  EXPECT_EQ(a.metadata.at("iteration"), "40");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, t] : b.tensors) EXPECT_EQ(a.tensors.at(name).data, t.data) << name;
}

}  // namespace poseidon::testing
