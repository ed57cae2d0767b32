// StepGraph in a build without the CUDA backend (core/cuda/step_graph.cpp
// captures in a build with it): nothing can be captured.
#include "core/step_graph.h"

#ifndef POSEIDON_HAVE_CUDA

namespace poseidon {

struct StepGraph::Exec {};

StepGraph::StepGraph(const Device& device) : device_(device) {}
StepGraph::~StepGraph() = default;
std::string StepGraph::capture(const std::function<void()>&) { return "this build has no CUDA backend"; }
bool StepGraph::ready() const { return false; }
void StepGraph::launch() {}
void StepGraph::discard() {}

}  // namespace poseidon

#endif
