// Progress line and JSON-lines metrics.
#include "tools/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/units.h"

namespace poseidon {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  out_.open(path, std::ios::app);
  if (!out_) throw Error(path + ": cannot open the metrics file for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  if (!out_) throw Error(path_ + ": cannot write the metrics file (" + std::strerror(errno) + ")");
}

double Progress::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Progress::Progress(int64_t first_iter, int64_t max_iter, int64_t display, bool quiet, Clock clock)
    : first_(first_iter),
      max_(max_iter),
      display_(display),
      quiet_(quiet),
      tty_(isatty(STDERR_FILENO)),
      clock_(std::move(clock)),
      last_iter_(first_iter) {
  start_ = last_draw_ = clock_();
}

double Progress::train_time() const {
  const double now = pauses_ > 0 ? paused_at_ : clock_();
  return now - start_ - paused_total_;
}

void Progress::pause() {
  if (pauses_++ == 0) paused_at_ = clock_();
}

void Progress::resume() {
  if (pauses_ == 0 || --pauses_ > 0) return;
  paused_total_ += clock_() - paused_at_;
}

void Progress::add_data_wait(double seconds) {
  interval_wait_ += seconds;
  data_wait_ += seconds;
}

void Progress::step(int64_t iter, int64_t epoch, float loss, double lr, int64_t images, const std::string& extra) {
  smoothed_ = iter == first_ + 1 ? loss : 0.95 * smoothed_ + 0.05 * loss;
  last_iter_ = iter;
  images_ += images;
  interval_images_ += images;
  ++interval_iters_;
  if (steady_from_ >= 0) steady_images_ += images;
  const double now = train_time();
  const double interval_s = now - interval_start_;
  const double rate = interval_s > 0 ? interval_images_ / interval_s : 0;
  const double per_iter = interval_s / static_cast<double>(interval_iters_);
  const double wait_share = interval_s > 0 ? std::min(1.0, interval_wait_ / interval_s) : 0;
  const bool permanent = display_ > 0 && (iter % display_ == 0 || iter == max_);
  const bool ends_interval = permanent || (display_ <= 0 && iter == first_ + 1);
  if (ends_interval || steady_from_ < 0) rate_ = rate;
  if (ends_interval) {
    interval_start_ = now;
    interval_iters_ = interval_images_ = 0;
    interval_wait_ = 0;
    // The first interval (or, without one, the first iteration) is warm-up.
    if (steady_from_ < 0) {
      steady_from_ = iter + 1;
      steady_start_ = now;
    }
  }
  const double wall_now = clock_();
  const bool redraw = tty_ && wall_now - last_draw_ > 0.1;
  if (quiet_ || (!permanent && !redraw)) return;
  last_draw_ = wall_now;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "iter %lld/%lld  epoch %lld  loss %.4f (avg %.4f)  lr %.3g  %s img/s  data wait %.0f%%  ETA %s",
                static_cast<long long>(iter), static_cast<long long>(max_), static_cast<long long>(epoch), loss,
                smoothed_, lr, human_number(rate).c_str(), 100 * wait_share,
                human_seconds(per_iter * (max_ - iter)).c_str());
  draw(extra.empty() ? std::string(buf) : std::string(buf) + "  " + extra, permanent);
}

TrainingTotals Progress::totals() const {
  TrainingTotals t;
  t.first_iter = first_;
  t.last_iter = last_iter_;
  t.images = images_;
  t.wall_s = clock_() - start_;
  t.train_s = train_time();
  t.data_wait_s = data_wait_;
  // Ended before the first interval did: the whole run is all there is.
  const bool warmed = steady_from_ >= 0 && steady_from_ <= last_iter_;
  t.steady_from_iter = warmed ? steady_from_ : first_ + 1;
  t.steady_images = warmed ? steady_images_ : images_;
  t.steady_s = warmed ? t.train_s - steady_start_ : t.train_s;
  return t;
}

void Progress::note(const std::string& line) {
  if (!quiet_) draw(line, true);
}

void Progress::draw(const std::string& line, bool permanent) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), permanent ? "\n" : "");
    live_ = !permanent;
  } else if (permanent) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (live_) std::fprintf(stderr, "\n");
  live_ = false;
}

}  // namespace poseidon
