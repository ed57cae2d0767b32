// The host work recorded around a captured step (see step_recording.h).
#include "core/step_recording.h"

#include "core/error.h"

namespace poseidon {

namespace {
thread_local StepRecording* active_recording = nullptr;
}

StepRecording::~StepRecording() {
  if (active_recording == this) active_recording = nullptr;
}

StepRecording* StepRecording::active() { return active_recording; }

void StepRecording::start() {
  POSEIDON_CHECK(!active_recording) << "a step is already being recorded on this thread";
  active_recording = this;
}

void StepRecording::stop() {
  if (active_recording == this) active_recording = nullptr;
}

void StepRecording::before_launch(BeforeLaunch work) { before_.push_back(std::move(work)); }

void StepRecording::after_launch(std::function<void()> work) { after_.push_back(std::move(work)); }

void StepRecording::run_before() {
  for (const BeforeLaunch& work : before_) work(launched_);
  launched_ = true;
}

void StepRecording::run_after() {
  for (const auto& work : after_) work();
}

void StepRecording::clear() {
  before_.clear();
  after_.clear();
  launched_ = false;
}

}  // namespace poseidon
