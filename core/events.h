// The seam between the engine and distribution. The Net reports each
// parameter's gradient as soon as backward has produced it, and asks before a
// layer's forward whether that layer's parameters are current. A single
// process plugs LocalGradSink (update at once); dist/ plugs its scheduler.
#pragma once

#include <cstdint>

#include "core/layer.h"

namespace poseidon {

class GradSink {
 public:
  virtual ~GradSink() = default;
  // Called before `layer`'s forward; returns when its parameters are current.
  virtual void await_params(const Layer& layer) {}
  // `param`'s gradient for this iteration is complete (its value is no longer
  // read by the rest of backward).
  virtual void grad_ready(Param& param) = 0;
  // Every grad_ready of this iteration has been issued.
  virtual void backward_done() {}
  // Around each layer's forward (after await_params) and backward (before
  // its grad_ready calls), for timelines.
  virtual void layer_begin(const Layer& layer, bool backward) {}
  virtual void layer_end(const Layer& layer, bool backward) {}
};

}  // namespace poseidon
