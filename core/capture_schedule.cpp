// The host's rule for which steps are captured as a CUDA graph (see
// capture_schedule.h).
#include "core/capture_schedule.h"

#include "core/error.h"

namespace poseidon {

CudaGraphMode parse_cuda_graph_mode(const std::string& text) {
  if (text == "auto") return CudaGraphMode::automatic;
  if (text == "off") return CudaGraphMode::off;
  throw Error("expected auto or off, found '" + text + "'");
}

std::string why_uncaptured(const CaptureFacts& f) {
  if (f.mode == CudaGraphMode::off) return "cuda_graph is off";
  if (!f.on_gpu) return "the net is not on a GPU";
  if (f.distributed) return "a distributed run exchanges gradients between ranks each step";
  if (f.emulated) return "the compute is emulated";
  if (f.traced) return "a timeline times each layer from the host";
  if (!f.reads_late)
    return "steps are not read late through the finite guard (solver.check_finite is false, or the batches come "
           "from a caller's feed)";
  if (!f.uncapturable_layers.empty()) {
    std::string list;
    for (const std::string& l : f.uncapturable_layers) list += (list.empty() ? "" : ", ") + l;
    return "layers that cannot be captured (a CPU layer in a GPU net, or one that says so): " + list;
  }
  return "";
}

StepMode CaptureSchedule::next() {
  POSEIDON_CHECK(!capturing_) << "a capture was neither reported captured nor failed";
  if (!enabled_) return StepMode::plain;
  if (has_graph_) return StepMode::replay;
  if (plain_left_ > 0) {
    --plain_left_;
    return StepMode::plain;
  }
  capturing_ = true;
  return StepMode::capture;
}

void CaptureSchedule::captured() {
  POSEIDON_CHECK(capturing_) << "no capture was scheduled";
  capturing_ = false;
  has_graph_ = true;
}

void CaptureSchedule::failed() {
  POSEIDON_CHECK(capturing_) << "no capture was scheduled";
  capturing_ = false;
  enabled_ = false;
}

void CaptureSchedule::restart() {
  has_graph_ = false;
  plain_left_ = kWarmupSteps;
}

}  // namespace poseidon
