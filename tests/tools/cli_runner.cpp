// Subprocess runner and input writers for CLI tests.
#include "tools/cli_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace poseidon::testing {

namespace {
std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

CliResult run_poseidon(const std::string& args) { return run_captured(std::string(POSEIDON_BINARY) + " " + args); }

CliResult run_captured(const std::string& command) {
  TempDir tmp;
  const std::string cmd = command + " >" + tmp.file("out") + " 2>" + tmp.file("err") + " </dev/null";
  int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = slurp(tmp.file("out"));
  r.err = slurp(tmp.file("err"));
  return r;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "poseidon-test-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  std::string p = file(name);
  std::ofstream(p) << text;
  return p;
}

void write_idx(const std::string& path, const std::vector<int32_t>& dims, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  unsigned char magic[4] = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  out.write(reinterpret_cast<char*>(magic), 4);
  for (int32_t d : dims) {
    unsigned char be[4] = {static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
                           static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)};
    out.write(reinterpret_cast<char*>(be), 4);
  }
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_idx_dataset(const std::string& images, const std::string& labels, int n, int classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> pixels(static_cast<size_t>(n) * 28 * 28), label(n);
  for (auto& p : pixels) p = static_cast<uint8_t>(rng() % 256);
  for (auto& l : label) l = static_cast<uint8_t>(rng() % classes);
  write_idx(images, {n, 28, 28}, pixels);
  write_idx(labels, {n}, label);
}

}  // namespace poseidon::testing
