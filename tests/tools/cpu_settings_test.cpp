// The binary's OpenMP wait policy: a short spin when it runs alone on its
// host, passive waits for each of several MPI ranks on one host, and the
// environment's choice wherever it makes one (tools/cli/cpu_tuning.h). libgomp prints the settings it runs under
// with OMP_DISPLAY_ENV=verbose; the binary restarts itself to apply its
// choice, so the last print is the one the run keeps.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// Sets or unsets an environment variable for one scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The value of the last "  NAME = 'value'" line libgomp printed, or nullopt.
std::optional<std::string> last_setting(const std::string& text, const std::string& name) {
  const std::string key = "  " + name + " = '";
  const size_t at = text.rfind(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + key.size();
  return text.substr(begin, text.find('\'', begin) - begin);
}

// The environment of one run of the binary: its wait policy, spin count and
// Open MPI's count of ranks on this host (null: unset), the other MPI
// launchers' counts unset.
struct RunEnvironment {
  RunEnvironment(const char* wait_policy, const char* spin_count, const char* ranks_on_host)
      : policy("OMP_WAIT_POLICY", wait_policy),
        spins("GOMP_SPINCOUNT", spin_count),
        open_mpi("OMPI_COMM_WORLD_LOCAL_SIZE", ranks_on_host),
        mpich("MPI_LOCALNRANKS", nullptr),
        slurm("SLURM_NTASKS_PER_NODE", nullptr) {}
  ScopedEnv policy, spins, open_mpi, mpich, slurm;
};

// The spin count a run keeps, as libgomp prints it.
std::optional<std::string> spin_count_of_a_run(const char* wait_policy, const char* spin_count,
                                               const char* ranks_on_host = nullptr) {
  ScopedEnv display("OMP_DISPLAY_ENV", "verbose");
  RunEnvironment environment(wait_policy, spin_count, ranks_on_host);
  CliResult r = run_poseidon("layers");
  EXPECT_EQ(r.status, 0) << r.err;
  return last_setting(r.err + r.out, "GOMP_SPINCOUNT");
}

// What `poseidon info` says of the OpenMP waits with nothing set but the
// ranks on this host.
std::string info_waits(const char* ranks_on_host) {
  RunEnvironment environment(nullptr, nullptr, ranks_on_host);
  CliResult r = run_poseidon("info --json");
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out).value("OpenMP waits", "");
}

}  // namespace

TEST(CpuSettings, InfoSaysHowThreadsWait) {
  EXPECT_EQ(info_waits(nullptr), "GOMP_SPINCOUNT=3000");
  EXPECT_EQ(info_waits("2"), "OMP_WAIT_POLICY=passive");
}

TEST(CpuSettings, SpinsBrieflyAloneWaitsPassivelyBesideOtherRanksKeepsTheEnvironmentsChoice) {
  const std::optional<std::string> unset = spin_count_of_a_run(nullptr, nullptr);
  if (!unset) GTEST_SKIP() << "the OpenMP runtime is not libgomp (no GOMP_SPINCOUNT in OMP_DISPLAY_ENV)";
  EXPECT_EQ(*unset, "3000") << "nothing set, alone on the host: a short spin";
  EXPECT_EQ(spin_count_of_a_run(nullptr, nullptr, "1"), "3000") << "the only rank on its host: a short spin";
  EXPECT_EQ(spin_count_of_a_run(nullptr, nullptr, "2"), "0") << "one of 2 ranks on the host: passive waits";
  EXPECT_EQ(spin_count_of_a_run("active", nullptr), "30000000000") << "OMP_WAIT_POLICY=active is kept";
  EXPECT_EQ(spin_count_of_a_run(nullptr, "1000"), "1000") << "GOMP_SPINCOUNT is kept";
  EXPECT_EQ(spin_count_of_a_run(nullptr, "1000", "2"), "1000") << "GOMP_SPINCOUNT is kept beside other ranks";
}

}  // namespace poseidon::testing
