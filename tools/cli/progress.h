// Training observability: a live progress line on the terminal (iteration,
// epoch, loss, lr, img/s, share of time waiting for data, ETA) and metrics as JSON lines in a file.
//
// The rate on a line covers exactly the iterations since the previous
// permanent line (the display interval), training time only: tests and
// checkpoints run between pause() and resume() and are left out, so a test
// does not make the next line look slow.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

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

// What a run did, for its summary (tools/cli/run_summary.h).
struct TrainingTotals {
  int64_t first_iter = 0, last_iter = 0;  // iterations first_iter + 1 .. last_iter ran
  int64_t images = 0;                     // over every rank
  double wall_s = 0;                      // since the Progress was made, everything included
  double train_s = 0;                     // training iterations only
  double data_wait_s = 0;                 // of train_s, waiting for the data loader
  // Once warmed up: the iterations after the first display interval (after
  // the first iteration when there is no such interval).
  int64_t steady_from_iter = 0;  // the first steady iteration
  int64_t steady_images = 0;
  double steady_s = 0;
};

class Progress {
 public:
  using Clock = std::function<double()>;  // monotonic seconds
  static double steady_seconds();

  Progress(int64_t first_iter, int64_t max_iter, int64_t display, bool quiet, Clock clock = steady_seconds);
  // After each iteration: `iter` completed iterations so far, `images` the
  // iteration's over every rank; `extra` is appended to the line (e.g.
  // communication figures of a distributed run).
  void step(int64_t iter, int64_t epoch, float loss, double lr, int64_t images, const std::string& extra = "");
  // Seconds of the coming step()'s iteration spent waiting for its batch;
  // the line shows their share of the interval's training time.
  void add_data_wait(double seconds);
  // Time from pause() to resume() is not training time; pauses nest.
  void pause();
  void resume();
  void note(const std::string& line);  // a permanent line (test results, snapshots)
  void finish();
  double smoothed_loss() const { return smoothed_; }
  // The last display interval's rate (the interval so far before the first line).
  double images_per_sec() const { return rate_; }
  TrainingTotals totals() const;

 private:
  void draw(const std::string& line, bool permanent);
  double train_time() const;  // training seconds since construction

  int64_t first_, max_, display_;
  bool quiet_, tty_;
  Clock clock_;
  bool live_ = false;  // a transient line is on screen
  double smoothed_ = 0, rate_ = 0;
  double start_ = 0, paused_total_ = 0, paused_at_ = 0, last_draw_ = 0;
  int pauses_ = 0;  // open pause() calls
  int64_t last_iter_ = 0;
  // The display interval in progress.
  double interval_start_ = 0;  // training time at its start
  int64_t interval_iters_ = 0, interval_images_ = 0;
  double interval_wait_ = 0, data_wait_ = 0;
  // Totals, and the warmed-up part.
  int64_t images_ = 0, steady_from_ = -1, steady_images_ = 0;
  double steady_start_ = 0;
};

}  // namespace poseidon
