// A training step captured as a CUDA graph and replayed (see graphed_step.h).
#include "core/graphed_step.h"

#include <map>
#include <utility>

namespace poseidon {

CaptureFacts net_capture_facts(const Net& net, CudaGraphMode mode) {
  CaptureFacts f;
  f.mode = mode;
  f.on_gpu = net.device().is_cuda();
  for (size_t i = 0; i < net.num_layers(); ++i)
    if (!net.layer(i).capturable())
      f.uncapturable_layers.push_back(net.layer(i).name() + " (" + net.layer(i).type() + ")");
  return f;
}

GraphedStep::GraphedStep(const Device& device, const CaptureFacts& facts, HostState state)
    : schedule_(why_uncaptured(facts).empty()), state_(state) {
  const std::string why = why_uncaptured(facts);
  if (!why.empty()) {
    // Said only where a GPU step could have been captured.
    if (facts.on_gpu) note_ = "cuda graph: steps run uncaptured: " + why;
    return;
  }
  graph_.emplace(device);
}

void GraphedStep::launch() {
  recording_.run_before();
  graph_->launch();
  recording_.run_after();
}

void GraphedStep::run(const std::function<void()>& queue) {
  last_ = schedule_.next();
  if (last_ == StepMode::plain) return queue();
  if (last_ == StepMode::replay) return launch();
  const std::mt19937_64 rng = *state_.rng;
  const std::map<std::string, int64_t> steps = state_.solver->steps();
  recording_.clear();
  recording_.start();
  std::string why;
  try {
    why = graph_->capture(queue);
  } catch (...) {  // CUDA's own failure around the capture: later sends must not stay deferred
    recording_.stop();
    throw;
  }
  recording_.stop();
  if (why.empty()) {
    schedule_.captured();
    note_ = "cuda graph: the training step is captured and replayed from here";
    return launch();
  }
  recording_.clear();
  *state_.rng = rng;
  state_.solver->steps() = steps;
  state_.held->discard_held();
  schedule_.failed();
  last_ = StepMode::plain;
  note_ = "cuda graph: the capture failed, steps run uncaptured from here: " + why;
  queue();
}

void GraphedStep::restart() {
  if (!graph_) return;
  graph_->discard();
  recording_.clear();
  schedule_.restart();
}

std::string GraphedStep::take_note() { return std::exchange(note_, std::string()); }

}  // namespace poseidon
