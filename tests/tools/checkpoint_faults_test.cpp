// Checkpoints under faults, through the poseidon binary: the numeric guard's
// "state before the iteration" is that state exactly (batch-norm running
// statistics included), temporary files left by a run killed while writing
// are removed at the next start, and a disk that fills up while a checkpoint
// is written (a file-size limit, and a small tmpfs where this process may
// mount one) leaves the previous checkpoint intact and stops with a clear
// error.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "core/safetensors.h"
#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

namespace fs = std::filesystem;

const char* kBatchNormModel = R"(name: bn
inputs: {data: [1, 28, 28], label: []}
layers:
  - {name: conv1, type: conv, inputs: data, num_output: 4, kernel_size: 5, stride: 2}
  - {name: bn1, type: batch_norm}
  - {name: relu1, type: relu}
  - {name: fc1, type: fc, num_output: 10}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
)";

// A training config of kBatchNormModel on synthetic data in `d`.
std::string write_config(const TempDir& d, const std::string& solver) {
  d.write("model.yaml", kBatchNormModel);
  return d.write("config.yaml",
                 "model: model.yaml\nseed: 3\nthreads: 1\n"
                 "data: {train: {source: synthetic, shape: [1, 28, 28], size: 64, batch_size: 8}}\n"
                 "solver: " + solver + "\ntrain: {display: 0, output_dir: " + d.file("out") + "}\n");
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> temporaries_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (is_safetensors_temporary(e.path().filename().string())) found.push_back(e.path().string());
  return found;
}

// Runs `poseidon <args>` with files limited to `max_bytes` (RLIMIT_FSIZE) and
// SIGXFSZ ignored, so a write beyond the limit fails with EFBIG as a write
// to a full disk fails with ENOSPC.
CliResult run_with_file_limit(const std::string& args, rlim_t max_bytes) {
  TempDir tmp;
  const std::string cmd = std::string(POSEIDON_BINARY) + " " + args + " >" + tmp.file("out") + " 2>" + tmp.file("err");
  const pid_t child = fork();
  if (child == 0) {
    const rlimit limit{max_bytes, max_bytes};
    std::signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &limit) == 0) execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int raw = 0;
  waitpid(child, &raw, 0);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), file_bytes(tmp.file("out")),
          file_bytes(tmp.file("err"))};
}

// The first run writes out/final.safetensors; the second, which fails while
// writing the same file, must leave it as it was, with no temporary file.
void expect_previous_checkpoint_kept(const std::string& final_path, const std::string& before, const CliResult& r,
                                     const std::string& reason) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(final_path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the file at this path is unchanged"), std::string::npos) << r.err;
  EXPECT_TRUE(file_bytes(final_path) == before) << "the previous checkpoint changed";
  EXPECT_TRUE(temporaries_in(fs::path(final_path).parent_path().string()).empty());
}

}  // namespace

TEST(CheckpointFaults, GuardSavesTheStateBeforeTheIterationBuffersIncluded) {
  TempDir d;
  const std::string config = write_config(d, "{lr: 1e8, momentum: 0.9, max_iter: 30}");
  CliResult failed = run_poseidon("train " + config + " --quiet");
  ASSERT_EQ(failed.status, 2) << failed.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(failed.err, m, std::regex("saved in (\\S+iter_([0-9]+)\\.safetensors)"))) << failed.err;
  const int before = std::stoi(m[2]);
  // At least one update and one forward before the bad iteration, so the
  // state saved differs from the initial one in every part.
  ASSERT_GE(before, 1) << failed.err;

  // The same run stopped by max_iter just before the bad iteration.
  CliResult straight =
      run_poseidon("train " + config + " --quiet --set solver.max_iter=" + m[2].str() + " --set train.output_dir=" +
                   d.file("straight"));
  ASSERT_EQ(straight.status, 0) << straight.err;
  SafetensorsFile guard = read_safetensors(m[1]);
  SafetensorsFile reference = read_safetensors(d.file("straight/final.safetensors"));
  EXPECT_EQ(guard.metadata, reference.metadata);
  ASSERT_EQ(guard.tensors.size(), reference.tensors.size());
  ASSERT_TRUE(guard.tensors.count("bn1.running_mean"));
  ASSERT_TRUE(guard.tensors.count("bn1.running_var"));
  for (const auto& [name, t] : reference.tensors) {
    ASSERT_TRUE(guard.tensors.count(name)) << name;
    EXPECT_TRUE(guard.tensors.at(name).data == t.data) << name << " is not the state before the iteration";
  }
  // The running statistics have moved from their initial values (0 and 1).
  const auto& mean = reference.tensors.at("bn1.running_mean").data;
  EXPECT_TRUE(std::any_of(mean.begin(), mean.end(), [](float v) { return v != 0.f; }));
}

TEST(CheckpointFaults, TemporaryFilesOfAKilledRunAreRemovedAtStart) {
  TempDir d;
  const std::string config = write_config(d, "{lr: 0.01, momentum: 0.9, max_iter: 2}");
  fs::create_directories(d.file("out"));
  // What a run killed while writing its snapshot or final checkpoint leaves behind.
  d.write("out/iter_1000.safetensors.tmp.4242", std::string(4096, 'x'));
  d.write("out/final.safetensors.tmp.77", std::string(4096, 'x'));
  d.write("out/notes.tmp.txt", "not a checkpoint");
  CliResult r = run_poseidon("train " + config);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(fs::exists(d.file("out/iter_1000.safetensors.tmp.4242")));
  EXPECT_FALSE(fs::exists(d.file("out/final.safetensors.tmp.77")));
  EXPECT_NE(r.out.find("removed " + d.file("out/final.safetensors.tmp.77")), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d.file("out/notes.tmp.txt")));
  EXPECT_TRUE(fs::exists(d.file("out/final.safetensors")));
  EXPECT_TRUE(temporaries_in(d.file("out")).empty());
}

TEST(CheckpointFaults, AFileSizeLimitWhileWritingKeepsThePreviousCheckpoint) {
  TempDir d;
  const std::string config = write_config(d, "{lr: 0.01, momentum: 0.9, max_iter: 2}");
  ASSERT_EQ(run_poseidon("train " + config + " --quiet").status, 0);
  const std::string final_path = d.file("out/final.safetensors");
  const std::string before = file_bytes(final_path);
  ASSERT_GT(before.size(), 4096u);
  // Room for the metrics and half a checkpoint.
  CliResult r = run_with_file_limit("train " + config + " --quiet --set solver.max_iter=3", before.size() / 2);
  expect_previous_checkpoint_kept(final_path, before, r, "File too large");
}

TEST(CheckpointFaults, AFullDiskWhileWritingKeepsThePreviousCheckpoint) {
  TempDir d;
  const std::string config = write_config(d, "{lr: 0.01, momentum: 0.9, max_iter: 2}");
  ASSERT_EQ(run_poseidon("train " + config + " --quiet --set train.output_dir=" + d.file("probe")).status, 0);
  const size_t checkpoint_bytes = fs::file_size(d.file("probe/final.safetensors"));
  // A disk with room for one checkpoint and a half.
  fs::create_directories(d.file("out"));
  const std::string size = "size=" + std::to_string(checkpoint_bytes * 3 / 2 / 4096 * 4096 + 4096);
  if (mount("tmpfs", d.file("out").c_str(), "tmpfs", 0, size.c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "); the file-size limit test covers it";
  struct Unmount {
    std::string at;
    ~Unmount() { umount(at.c_str()); }
  } unmount{d.file("out")};
  ASSERT_EQ(run_poseidon("train " + config + " --quiet").status, 0);
  const std::string final_path = d.file("out/final.safetensors");
  const std::string before = file_bytes(final_path);
  CliResult r = run_poseidon("train " + config + " --quiet --set solver.max_iter=3");
  expect_previous_checkpoint_kept(final_path, before, r, "No space left on device");
}

}  // namespace poseidon::testing
