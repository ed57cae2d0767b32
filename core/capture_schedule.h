// Which training steps run as a CUDA graph, decided on the host with no
// CUDA call, so that the rule can be read and tested on any machine. A run
// is eligible when the config allows it (`cuda_graph: auto`), the net is on
// a GPU in a single process, its steps are read late through the finite
// guard (core/step_gate.h: every per-step number then reaches the GPU
// through fixed buffers) and no layer runs on the host in the GPU net;
// why_uncaptured says in one line why not.
// An eligible run's steps go plain for a warm-up (algorithm searches,
// workspaces and staging buffers grow there, never inside a capture), then
// one step is captured and the rest replay it, until the net changes shape
// (a test at another batch: restart) or a capture fails (failed: plain
// from then on).
#pragma once

#include <string>
#include <vector>

namespace poseidon {

enum class CudaGraphMode { automatic, off };
// "auto" or "off"; anything else throws Error naming both.
CudaGraphMode parse_cuda_graph_mode(const std::string& text);

struct CaptureFacts {
  CudaGraphMode mode = CudaGraphMode::automatic;
  bool on_gpu = false;
  bool distributed = false;                      // ranks exchange gradients
  bool emulated = false;                         // compute emulated, no real step
  bool traced = false;                           // a timeline times each layer from the host
  bool reads_late = false;                       // the finite guard reads each step after the next is issued
  std::vector<std::string> uncapturable_layers;  // "name (type)" of each !Layer::capturable()
};

// Empty where the steps may be captured; otherwise the reason, one line.
std::string why_uncaptured(const CaptureFacts& facts);

enum class StepMode { plain, capture, replay };

class CaptureSchedule {
 public:
  // Plain steps before the first capture and after each restart.
  static constexpr int kWarmupSteps = 3;
  // `eligible`: why_uncaptured gave no reason.
  explicit CaptureSchedule(bool eligible) : enabled_(eligible) {}

  // How the next step runs. After capture the caller reports captured()
  // or failed().
  StepMode next();
  void captured();
  // The capture failed: every later step is plain.
  void failed();
  // The captured graph no longer fits the net (its buffers moved): plain
  // steps for a warm-up, then a capture again.
  void restart();
  bool has_graph() const { return has_graph_; }

 private:
  bool enabled_;
  bool has_graph_ = false;
  bool capturing_ = false;
  int plain_left_ = kWarmupSteps;
};

}  // namespace poseidon
