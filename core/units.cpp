// Human-readable durations, sizes and counts for messages and the CLI.
#include "core/units.h"

#include <cmath>
#include <cstdio>

namespace poseidon {

namespace {
// `value` with three significant digits in fixed notation: 4.82, 48.2, 482, 4821.
std::string three_digits(double value) {
  const double magnitude = std::fabs(value);
  // (thresholds where rounding would add a digit: 9.996 prints as 10.0, not 10.00)
  const int decimals = magnitude >= 99.95 || magnitude == 0 ? 0 : magnitude >= 9.995 ? 1 : 2;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}
}  // namespace

std::string human_number(double value) {
  if (!std::isfinite(value)) return "?";
  if (std::fabs(value) > 0 && std::fabs(value) < 0.01) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.2g", value);
    return buf;
  }
  return three_digits(value);
}

std::string human_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds == 0) return "0 s";
  if (seconds < 0.9995e-3) return three_digits(seconds * 1e6) + " us";
  if (seconds < 0.9995) return three_digits(seconds * 1e3) + " ms";
  if (seconds < 59.5) return three_digits(seconds) + " s";
  const long s = std::lround(seconds);
  char buf[48];
  if (s < 3600)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  return buf;
}

std::string human_bytes(double bytes) {
  if (!std::isfinite(bytes) || bytes < 0) return "?";
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 999.5 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return (u == 0 ? std::to_string(std::lround(bytes)) : three_digits(bytes)) + " " + units[u];
}

}  // namespace poseidon
