// Replays fuzz corpora without libFuzzer, so that CI runs every input the
// fuzzers kept (tests/fuzz/corpus) through the same entry point the fuzzer
// calls: `fuzz_replay_<target> <folder or file>...`. An exception the target
// lets escape fails the run naming the input; a crash names it on stderr
// before the process dies.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

char current_input[4096];  // for the crash handler, which may not allocate
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
struct sigaction previous[std::size(kCrashSignals)];

// Names the input, then hands the signal back to whoever handled it before
// (a sanitizer's report, or the default: the process dies as it would have).
void on_crash(int sig) {
  const char prefix[] = "crash while replaying ";
  (void)!::write(STDERR_FILENO, prefix, sizeof prefix - 1);
  (void)!::write(STDERR_FILENO, current_input, std::strlen(current_input));
  (void)!::write(STDERR_FILENO, "\n", 1);
  for (size_t i = 0; i < std::size(kCrashSignals); ++i)
    if (kCrashSignals[i] == sig) sigaction(sig, &previous[i], nullptr);
  if (sig == SIGABRT) ::raise(sig);  // the others fault again on return
}

std::vector<std::filesystem::path> inputs_in(const std::vector<std::string>& args) {
  std::vector<std::filesystem::path> inputs;
  for (const std::string& arg : args) {
    if (!std::filesystem::is_directory(arg)) {
      inputs.emplace_back(arg);
      continue;
    }
    for (const auto& entry : std::filesystem::directory_iterator(arg))
      if (entry.is_regular_file()) inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <corpus folder or input file>...\n", argv[0]);
    return 2;
  }
  const std::vector<std::filesystem::path> inputs = inputs_in({argv + 1, argv + argc});
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (size_t i = 0; i < std::size(kCrashSignals); ++i) {
    struct sigaction action {};
    action.sa_handler = on_crash;
    sigaction(kCrashSignals[i], &action, &previous[i]);
  }
  int escaped = 0;
  for (const std::filesystem::path& path : inputs) {
    std::snprintf(current_input, sizeof current_input, "%s", path.c_str());
    std::ifstream in(path, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: escaped the target: %s\n", path.c_str(), e.what());
      ++escaped;
    }
  }
  std::printf("replayed %zu inputs, %d with an escaped exception\n", inputs.size(), escaped);
  return inputs.empty() || escaped ? 1 : 0;
}
