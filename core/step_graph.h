// A CUDA graph of the work a function queues on a GPU's compute stream:
// captured once, then launched again and again with the same kernels,
// arguments and buffers (core/graphed_step.h captures a training step with
// it). A capture that cannot be made is never an error: capture() ends it,
// discards what was captured, leaves the stream usable and says why.
// Implemented in core/cuda/step_graph.cpp; a build without the CUDA
// backend says it has none (core/step_graph_without_cuda.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/device.h"

namespace poseidon {

class StepGraph {
 public:
  explicit StepGraph(const Device& device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Captures what `queue` puts on the compute stream, in CUDA's thread-local
  // capture mode, and instantiates it. Returns "" on success; otherwise
  // one line saying why (an exception `queue` threw, GPU memory requested
  // during the capture among them (device_memory::allocate refuses it, so
  // that no tensor is left whose zeroing was only recorded), CUDA's error,
  // or a host wait during the capture, which a replay would not do), with
  // no graph kept.
  std::string capture(const std::function<void()>& queue);
  bool ready() const;
  // Queues the graph on the compute stream.
  void launch();
  void discard();

 private:
  struct Exec;
  Device device_;
  std::unique_ptr<Exec> exec_;
};

}  // namespace poseidon
