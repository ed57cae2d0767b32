// `poseidon plot`: one or more runs' metrics.jsonl become one PNG of their
// curves; a resumed run's repeated iterations count once; a missing or
// empty log is exit status 2 and one line naming it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tools/cli_runner.h"

namespace poseidon::testing {
namespace {

// `n` train records every 10 iterations from `first`, and a test record every 50.
std::string metrics(int first, int n) {
  std::ostringstream out;
  for (int i = 0; i < n; ++i) {
    const int iter = first + 10 * i;
    out << R"({"type": "train", "iter": )" << iter << R"(, "epoch": 0, "loss": )" << 2.0 / (1 + i)
        << R"(, "loss_avg": )" << 2.2 / (1 + i) << R"(, "lr": 0.01, "images_per_sec": )" << 400 + i << "}\n";
    if (iter % 50 == 0)
      out << R"({"type": "test", "iter": )" << iter << R"(, "loss": 1.0, "accuracy": )" << 0.5 + 0.01 * i
          << R"(, "examples": 100})"
          << "\n";
  }
  return out.str();
}

// Debian's python3, which `poseidon plot` runs.
bool matplotlib_present() { return std::system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0; }

TEST(PlotCli, RunsShareOneFigure) {
  if (!matplotlib_present()) GTEST_SKIP() << "python3-matplotlib is not installed";
  TempDir d;
  std::filesystem::create_directories(d.path() / "a");
  d.write("a/metrics.jsonl", metrics(10, 10));
  // Resumed at iteration 50: iterations 60-100 appear twice and count once.
  const std::string b = d.write("b.jsonl", metrics(10, 10) + metrics(60, 5) + R"({"type": "summary"})" + "\n");
  CliResult r = run_poseidon("plot " + d.file("a") + " " + b + " -o " + d.file("curves.png") + " --labels one,two");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(d.file("a/metrics.jsonl") + ": 10 train records, 2 test records"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(b + ": 10 train records, 2 test records"), std::string::npos) << r.out;
  std::ifstream png(d.file("curves.png"), std::ios::binary);
  std::string header(8, '\0');
  png.read(header.data(), 8);
  EXPECT_EQ(header, "\x89PNG\r\n\x1a\n");
  // Every panel's y axis is labelled (the PNG's Description text says so).
  std::stringstream bytes;
  bytes << png.rdbuf();
  for (const char* panel : {"loss: y loss,", "test accuracy: y accuracy,", "learning rate: y learning rate,",
                            "images per second (each display interval): y images / s,"})
    EXPECT_NE(bytes.str().find(panel), std::string::npos) << panel;
}

TEST(PlotCli, OneRunWritesBesideItsLog) {
  if (!matplotlib_present()) GTEST_SKIP() << "python3-matplotlib is not installed";
  TempDir d;
  d.write("metrics.jsonl", metrics(10, 3));
  CliResult r = run_poseidon("plot " + d.path().string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(d.file("curves.png"))) << r.out;
}

TEST(PlotCli, AMissingOrEmptyLogIsOneLineAndStatus2) {
  TempDir d;
  d.write("empty.jsonl", "");
  for (const std::string& log : {d.file("absent.jsonl"), d.file("empty.jsonl")}) {
    CliResult r = run_poseidon("plot " + log + " -o " + d.file("x.png"));
    EXPECT_EQ(r.status, 2) << log;
    EXPECT_EQ(r.err.rfind("error: " + log, 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

}  // namespace
}  // namespace poseidon::testing
