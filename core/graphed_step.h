// A training step's device work (forward, backward, the finite guard's
// scan and the updates) run as a CUDA graph once the steps are steady: the
// schedule (core/capture_schedule.h) says which step is captured and which
// replay it; the host work a replay would skip is recorded as the step is
// captured and run around each launch (core/step_recording.h), so that a
// replayed step equals a plain one bit for bit. A capture that fails (a
// layer that waits for the host, memory requested mid-step, any CUDA
// error) is ended and forgotten, the host state the step had changed while
// it was captured is put back (the RNG, the solver's step counts, the held
// updates), the step runs plain, and so does every later one: a failed
// capture never fails training.
#pragma once

#include <functional>
#include <optional>
#include <random>
#include <string>

#include "core/capture_schedule.h"
#include "core/local_sink.h"
#include "core/net.h"
#include "core/solver.h"
#include "core/step_graph.h"
#include "core/step_recording.h"

namespace poseidon {

// The facts of `net` that decide whether its steps can be captured: the
// device and the layers that cannot (a CPU layer run on host copies in a
// GPU net, core/host_fallback_layer.h). The run's facts (mode,
// distributed, traced, ...) are the caller's to add.
CaptureFacts net_capture_facts(const Net& net, CudaGraphMode mode);

class GraphedStep {
 public:
  // What a step changes on the host while it is captured, put back when the
  // capture fails.
  struct HostState {
    std::mt19937_64* rng = nullptr;
    Solver* solver = nullptr;
    LocalGradSink* held = nullptr;
  };
  GraphedStep(const Device& device, const CaptureFacts& facts, HostState state);

  // Runs one step whose device work `queue` queues on the compute stream.
  void run(const std::function<void()>& queue);
  // The net's buffers moved (reshaped for a test at another batch): the
  // graph is discarded and captured again after a warm-up.
  void restart();
  // Whether the steps may be captured (why_uncaptured found nothing): only
  // then do they go through run(), plain ones included.
  bool captures() const { return graph_.has_value(); }
  // How the last step ran.
  StepMode last_mode() const { return last_; }
  // A line for the log when something worth saying happened (steps left
  // uncaptured and why, a step captured, a capture that failed and why),
  // once; empty otherwise.
  std::string take_note();

 private:
  void launch();

  CaptureSchedule schedule_;
  HostState state_;
  std::optional<StepGraph> graph_;  // only where the steps may be captured
  StepRecording recording_;
  StepMode last_ = StepMode::plain;
  std::string note_;
};

}  // namespace poseidon
