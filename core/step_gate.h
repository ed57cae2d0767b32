// StepGate: the finite guard of a training step in one process, kept on the
// step's device so that the host need not wait for it. close() follows a
// step's backward: one pass over its loss terms and every learnable
// gradient marks the gate when any is NaN or infinite, and the step's held
// updates are applied only while the gate is unmarked. On a GPU the pass is
// one launch writing a flag there (core/gate_scan.h) and the update
// launches read it themselves, so a step issued before an earlier one is
// read changes nothing once that one was not finite. read() gives a step's
// loss and verdict: on the host at once, on a GPU from pinned memory the
// device wrote behind the step, waiting for that copy alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device_memory.h"
#include "core/local_sink.h"
#include "core/net.h"
#include "core/solver.h"

namespace poseidon {

class StepGate {
 public:
  StepGate(Net& net, Solver& solver);
  ~StepGate();

  // After the backward of the step numbered `slot` (0 or 1: the trainer
  // alternates), whose updates `held` holds.
  void close(int slot, LocalGradSink& held);
  // close() on a GPU in its two halves, for a step captured as a CUDA graph
  // (core/graphed_step.h): the scan and the updates, which the graph holds,
  // then the readback into `slot` and the count, which follow each launch.
  void close_on_device(LocalGradSink& held);
  void closed(int slot);

  struct Reading {
    float loss = 0;      // Net::forward's result for the step
    bool finite = true;  // its loss and every learnable gradient
    // On the host, what was not finite, as the trainer reports it
    // ("non-finite gradient in layer ..." or describe_non_finite_loss's
    // text), found as the step closed; on a GPU empty (the trainer runs the
    // step again to find it).
    std::string what;
  };
  // The step last closed in `slot`. A step read non-finite takes back the
  // step counts the solver advanced for it and for the step closed after
  // it, whose updates the gate turned into nothing.
  Reading read(int slot);

 private:
  Net& net_;
  Solver& solver_;
  std::vector<Net::LossTerm> terms_;
  bool on_gpu_;
  // On the host: whether a step closed so far was not finite, and each
  // slot's reading.
  bool rejected_ = false;
  Reading readings_[2];
  // On a GPU: the loss terms' copies and the flag (core/gate_scan.h), their
  // pinned copies per slot, and which close each slot holds.
  Tensor gate_;
  std::unique_ptr<device_memory::Readback> readback_;
  int64_t closed_ = 0, closed_as_[2] = {0, 0};
  std::vector<Param*> updated_;  // the parameters the last close updated
};

}  // namespace poseidon
