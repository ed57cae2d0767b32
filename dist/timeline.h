// Timeline: a Chrome trace (the JSON that Perfetto and chrome://tracing open)
// of one process: each layer's forward and backward and each wait for
// parameters on the compute thread, each transfer of a plan unit on the
// communication thread. TracingSink records the compute side by wrapping the
// GradSink that training uses; the Scheduler records its transfers itself.
#pragma once

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/events.h"

namespace poseidon::dist {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  enum Thread { compute = 0, communication = 1 };

  explicit Timeline(int rank) : rank_(rank), origin_(Clock::now()) {}
  // A finished span; thread-safe.
  void add(std::string name, std::string category, Thread thread, Clock::time_point begin, Clock::time_point end,
           nlohmann::json args = nullptr);
  // Writes every span as Chrome trace JSON.
  void write(const std::string& path) const;

  // "run.json" for one process; "run.rank3.json" for rank 3 of several.
  static std::string path_for_rank(const std::string& path, int rank, int ranks);

 private:
  struct Span {
    std::string name, category;
    Thread thread;
    double begin_us, duration_us;
    nlohmann::json args;
  };
  int rank_;
  Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Span> spans_;
};

// Passes everything to `inner` and records layers and waits on `timeline`.
class TracingSink : public GradSink {
 public:
  TracingSink(GradSink& inner, Timeline& timeline) : inner_(inner), timeline_(timeline) {}
  const std::vector<BlobPart>& gradient_sources(const Param& param) const override {
    return inner_.gradient_sources(param);
  }
  void await_params(const Layer& layer) override;
  void grad_ready(Param& param) override { inner_.grad_ready(param); }
  void backward_done() override;
  void layer_begin(const Layer& layer, bool backward) override;
  void layer_end(const Layer& layer, bool backward) override;

 private:
  GradSink& inner_;
  Timeline& timeline_;
  Timeline::Clock::time_point layer_start_;
};

}  // namespace poseidon::dist
