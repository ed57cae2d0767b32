// Subprocess runner for the PyTorch reference scripts (see torch_scripts.h).
#include "tools/torch_scripts.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace poseidon::testing {

namespace {

const char* const kPython = "/usr/bin/python3";

ScriptResult run(const std::string& command) {
  ScriptResult r;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
  const int raw = ::pclose(pipe);
  if (raw != -1 && WIFEXITED(raw)) r.status = WEXITSTATUS(raw);
  return r;
}

}  // namespace

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

ScriptResult run_torch_script(const std::string& script, const std::string& args) {
  return run(std::string(kPython) + " " + shell_quoted(std::string(POSEIDON_SOURCE_DIR) + "/tests/torch/" + script) +
             " " + args);
}

std::string torch_unavailable() {
  static const std::string why = [] {
    ScriptResult probe = run(std::string(kPython) + " -c 'import torch'");
    return probe.status == 0 ? std::string() : std::string(kPython) + " cannot import torch:\n" + probe.output;
  }();
  return why;
}

Tensor tensor_of(const SafetensorsTensor& t) {
  Tensor out(t.shape);
  std::copy(t.data.begin(), t.data.end(), out.data());
  return out;
}

bool torch_skip_requested() {
  const char* skip = std::getenv("POSEIDON_SKIP_TORCH");
  return skip && std::string(skip) == "1";
}

double relative_error(const Tensor& ours, const SafetensorsTensor& ref) {
  double largest = 0, worst = 0;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    largest = std::max(largest, std::fabs(double(ref.data[i])));
    worst = std::max(worst, std::fabs(double(ours[i]) - ref.data[i]));
  }
  return worst / std::max(largest, 1e-30);
}

}  // namespace poseidon::testing
