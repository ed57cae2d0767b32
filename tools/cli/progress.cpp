// Progress line and JSON-lines metrics.
#include "tools/cli/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

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

Progress::Progress(int64_t first_iter, int64_t max_iter, int64_t display, bool quiet)
    : first_(first_iter), max_(max_iter), display_(display), quiet_(quiet),
      tty_(isatty(STDERR_FILENO)) {
  window_start_ = last_draw_ = std::chrono::steady_clock::now();
}

static std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int s = static_cast<int>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  return buf;
}

void Progress::step(int64_t iter, int64_t epoch, float loss, double lr, int64_t images, const std::string& extra) {
  smoothed_ = iter == first_ + 1 ? loss : 0.95 * smoothed_ + 0.05 * loss;
  window_images_ += images;
  auto now = std::chrono::steady_clock::now();
  double window = std::chrono::duration<double>(now - window_start_).count();
  if (window >= 1.0 || rate_ == 0) {
    if (window > 0) rate_ = window_images_ / window;
    if (window >= 1.0) {
      window_images_ = 0;
      window_start_ = now;
    }
  }
  bool permanent = display_ > 0 && (iter % display_ == 0 || iter == max_);
  bool redraw = tty_ && std::chrono::duration<double>(now - last_draw_).count() > 0.1;
  if (quiet_ || (!permanent && !redraw)) return;
  last_draw_ = now;
  double per_iter = rate_ > 0 ? images / rate_ : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "iter %lld/%lld  epoch %lld  loss %.4f (avg %.4f)  lr %.3g  %.0f img/s  ETA %s",
                static_cast<long long>(iter), static_cast<long long>(max_), static_cast<long long>(epoch),
                loss, smoothed_, lr, rate_, format_duration(per_iter * (max_ - iter)).c_str());
  draw(extra.empty() ? std::string(buf) : std::string(buf) + "  " + extra, permanent);
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
