// The binary's OpenMP wait policy: passive unless the environment chooses
// one (tools/cli/cpu_tuning.h). libgomp prints the settings it runs under
// with OMP_DISPLAY_ENV=verbose; the binary restarts itself to apply its
// choice, so the last print is the one the run keeps.
#include <gtest/gtest.h>

#include <cstdlib>
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

std::optional<std::string> spin_count_of_a_run(const char* wait_policy, const char* spin_count) {
  ScopedEnv display("OMP_DISPLAY_ENV", "verbose");
  ScopedEnv policy("OMP_WAIT_POLICY", wait_policy);
  ScopedEnv spins("GOMP_SPINCOUNT", spin_count);
  CliResult r = run_poseidon("layers");
  EXPECT_EQ(r.status, 0) << r.err;
  return last_setting(r.err + r.out, "GOMP_SPINCOUNT");
}

}  // namespace

TEST(CpuSettings, WaitsPassivelyUnlessTheEnvironmentChooses) {
  const std::optional<std::string> unset = spin_count_of_a_run(nullptr, nullptr);
  if (!unset) GTEST_SKIP() << "the OpenMP runtime is not libgomp (no GOMP_SPINCOUNT in OMP_DISPLAY_ENV)";
  EXPECT_EQ(*unset, "0") << "nothing set: passive waits, no spinning";
  EXPECT_EQ(spin_count_of_a_run("active", nullptr), "30000000000") << "OMP_WAIT_POLICY=active is kept";
  EXPECT_EQ(spin_count_of_a_run(nullptr, "1000"), "1000") << "GOMP_SPINCOUNT is kept";
}

}  // namespace poseidon::testing
