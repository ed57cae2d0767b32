// Timeline: a Chrome trace (the JSON that Perfetto and chrome://tracing open)
// of one process, in lanes (the trace's threads): each layer's forward and
// backward and each wait for parameters on the compute lane; the waits for
// the next batch, the solver updates, the tests, the checkpoints and, for a
// GPU net, each gradient's copy to the host (from its queueing after the
// layer's backward to its landing) each on a lane of their own; and each sync group of the communication plan (a PS
// parameter, an all-reduce bucket, an SFB layer) on its own lane of the
// communication thread, since several groups are in flight at once.
// TracingSink records the compute side by wrapping the GradSink that
// training uses; the Scheduler records its transfers, and its updates
// through TracingCompute (dist/schemes/exchange_compute.h); the trainer records
// data, tests and checkpoints; landing_recorder the copies.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/events.h"
#include "dist/gpu/host_staging_sink.h"

namespace poseidon::dist {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  enum Lane { compute = 0, data = 1, update = 2, test = 3, checkpoint = 4, device_to_host = 5 };
  // The lane of sync group `u` of the communication plan.
  static int group_lane(size_t u) { return 16 + static_cast<int>(u); }

  explicit Timeline(int rank);
  // Names a lane (the fixed ones are named already); thread-safe.
  void name_lane(int lane, std::string name);
  // A finished span; thread-safe.
  void add(std::string name, std::string category, int lane, Clock::time_point begin, Clock::time_point end,
           nlohmann::json args = nullptr);
  // Writes every span as Chrome trace JSON.
  void write(const std::string& path) const;

  // "run.json" for one process; "run.rank3.json" for rank 3 of several.
  static std::string path_for_rank(const std::string& path, int rank, int ranks);
  // The key of the trace's "otherData" that holds the wall-clock time of its
  // ts 0, in microseconds since the epoch.
  static constexpr const char* kOriginKey = "origin_unix_us";

 private:
  struct Span {
    std::string name, category;
    int lane;
    double begin_us, duration_us;
    nlohmann::json args;
  };
  int rank_;
  Clock::time_point origin_;
  // The origin on the wall clock, written with the trace so that the traces
  // of several processes can be put on one time axis (`poseidon trace merge`).
  std::chrono::system_clock::time_point wall_origin_;
  mutable std::mutex mutex_;
  std::map<int, std::string> lanes_;
  std::vector<Span> spans_;
};

// Passes everything to `inner` and records layers and waits on `timeline`;
// with `updates_in_grad_ready` (an unheld LocalGradSink: the update runs as
// each gradient is reported), also each grad_ready as an update. For a net
// on a GPU (`device`), each layer's span ends when its kernels have finished
// (the compute stream is waited for), so that the spans show the GPU's work
// rather than the queueing of it; the copy streams go on meanwhile, so their
// overlap with backward shows as it is.
class TracingSink : public GradSink {
 public:
  TracingSink(GradSink& inner, Timeline& timeline, Device device = {}, bool updates_in_grad_ready = false)
      : inner_(inner), timeline_(timeline), device_(device), updates_in_grad_ready_(updates_in_grad_ready) {}
  const std::vector<BlobPart>& gradient_sources(const Param& param) const override {
    return inner_.gradient_sources(param);
  }
  void await_params(const Layer& layer) override;
  void grad_ready(Param& param) override;
  void backward_done() override;
  void layer_begin(const Layer& layer, bool backward) override;
  void layer_end(const Layer& layer, bool backward) override;

 private:
  GradSink& inner_;
  Timeline& timeline_;
  Device device_;
  bool updates_in_grad_ready_;
  Timeline::Clock::time_point layer_start_;
};

// What HostStagingSink::observe_landings takes: records each gradient's copy
// to the host on `timeline`'s device-to-host lane.
HostStagingSink::LandingObserver landing_recorder(Timeline& timeline);

}  // namespace poseidon::dist
