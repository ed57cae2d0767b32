// Training observability: a live progress line on the terminal (iteration,
// epoch, loss, lr, img/s, ETA) and metrics as JSON lines in a file.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace poseidon {

class MetricsLog {
 public:
  // Appends to `path` (resumed runs continue the same log).
  explicit MetricsLog(const std::string& path);
  // Throws an Error when the record cannot be written (a full disk).
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

class Progress {
 public:
  Progress(int64_t first_iter, int64_t max_iter, int64_t display, bool quiet);
  // After each iteration: `iter` completed iterations so far; `extra` is
  // appended to the line (e.g. communication figures of a distributed run).
  void step(int64_t iter, int64_t epoch, float loss, double lr, int64_t images, const std::string& extra = "");
  void note(const std::string& line);  // a permanent line (test results, snapshots)
  void finish();
  double smoothed_loss() const { return smoothed_; }
  double images_per_sec() const { return rate_; }

 private:
  void draw(const std::string& line, bool permanent);

  int64_t first_, max_, display_;
  bool quiet_, tty_;
  bool live_ = false;  // a transient line is on screen
  double smoothed_ = 0, rate_ = 0;
  int64_t window_images_ = 0;
  std::chrono::steady_clock::time_point window_start_, last_draw_;
};

}  // namespace poseidon
