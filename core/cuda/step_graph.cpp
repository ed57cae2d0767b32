// Capturing and launching a CUDA graph of the compute stream's work (see
// core/step_graph.h).
#include "core/step_graph.h"

#include <cuda_runtime.h>

#include <exception>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/device_memory.h"
#include "core/device_pipeline.h"
#include "core/error.h"

namespace poseidon {

struct StepGraph::Exec {
  cudaGraphExec_t exec = nullptr;
  ~Exec() {
    // Destructors do not throw; a failure here was reported by earlier calls.
    if (exec) cudaGraphExecDestroy(exec);
  }
};

StepGraph::StepGraph(const Device& device) : device_(device) { device_memory::require(device); }

StepGraph::~StepGraph() = default;

bool StepGraph::ready() const { return exec_ != nullptr; }

void StepGraph::discard() { exec_.reset(); }

std::string StepGraph::capture(const std::function<void()>& queue) {
  discard();
  cudaStream_t stream = cuda::Context::get(device_.index).compute();
  const device_memory::DeviceCounts before = device_memory::device_counts(device_);
  const cudaError_t begun = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (begun != cudaSuccess) {
    cudaGetLastError();  // not sticky: clears it
    return std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begun);
  }
  std::string why;
  try {
    queue();
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
    why = "an exception of a type that is not std::exception";  // the capture still ends below
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (why.empty() && ended != cudaSuccess) why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
  // A request for GPU memory fails the capture where it is made (device_memory::allocate).
  const device_memory::DeviceCounts after = device_memory::device_counts(device_);
  if (why.empty() && after.host_waits != before.host_waits) why = "the step waits for the GPU from the host";
  auto exec = std::make_unique<Exec>();
  if (why.empty()) {
    const cudaError_t made = cudaGraphInstantiate(&exec->exec, graph, 0);
    if (made != cudaSuccess) {
      exec->exec = nullptr;  // whatever a failed instantiation left there is not destroyed
      why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
    }
  }
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a failed capture's errors are not sticky: cleared, so later checks see their own
  if (why.empty()) exec_ = std::move(exec);
  return why;
}

void StepGraph::launch() {
  POSEIDON_CHECK(exec_) << "no captured graph to launch";
  POSEIDON_CUDA_CHECK(cudaGraphLaunch(exec_->exec, cuda::Context::get(device_.index).compute()));
}

}  // namespace poseidon
