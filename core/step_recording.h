// The host's part of a training step captured as a CUDA graph. A replay
// runs the captured device work alone, so what the step does on the host
// each time (a dropout layer's draw from the run's RNG, the solver's step
// counts and learning rate, a loss layer's status brought back to pinned
// memory) is recorded while the step is captured, by the code that does it
// (device_memory::StepUpload, cuda::PinnedStatus), and run again around
// each launch: before it, each number is worked out anew and copied to its
// fixed GPU buffer; after it, each readback is queued. Those copies are
// never in the graph, so its pinned addresses and events do not matter to
// it. Plain C++: no CUDA call, so that the order is tested anywhere.
#pragma once

#include <functional>
#include <vector>

namespace poseidon {

class StepRecording {
 public:
  StepRecording() = default;
  ~StepRecording();
  StepRecording(const StepRecording&) = delete;
  StepRecording& operator=(const StepRecording&) = delete;

  // The recording this thread's capture adds to, or null (no capture).
  static StepRecording* active();
  // Makes this the thread's active recording, until stop().
  void start();
  void stop();

  // Work before each launch, in the order recorded. It is called with
  // `again` false before the launch of the step being captured (whose host
  // work just ran as it was captured: it only sends) and true before every
  // later launch (it works its numbers out again, then sends).
  using BeforeLaunch = std::function<void(bool again)>;
  void before_launch(BeforeLaunch work);
  // Work after each launch (readbacks queued behind the graph), in order.
  void after_launch(std::function<void()> work);

  void run_before();
  void run_after();
  // Forgets everything recorded (a failed capture, a discarded graph).
  void clear();
  bool empty() const { return before_.empty() && after_.empty(); }

 private:
  std::vector<BeforeLaunch> before_;
  std::vector<std::function<void()>> after_;
  bool launched_ = false;
};

}  // namespace poseidon
