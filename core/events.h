// The seam between the engine and distribution. The Net reports each
// parameter's gradient as soon as backward has produced it, and asks before a
// layer's forward whether that layer's parameters are current. A single
// process plugs LocalGradSink (update at once); dist/ plugs its scheduler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/layer.h"

namespace poseidon {

// A blob's value or gradient: what a sink may form a gradient from.
struct BlobPart {
  std::string blob;
  bool gradient = false;  // the blob's gradient rather than its value
};

class GradSink {
 public:
  virtual ~GradSink() = default;
  // The blob parts from which this sink forms `param`'s gradient itself, read
  // when grad_ready(param) is called (for example an FC weight's gradient as
  // a product of the layer's input and output gradient). Empty, the default:
  // backward computes the gradient. Otherwise backward may skip it.
  virtual const std::vector<BlobPart>& gradient_sources(const Param& param) const { return no_sources(); }
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

 protected:
  static const std::vector<BlobPart>& no_sources() {
    static const std::vector<BlobPart> none;
    return none;
  }
};

}  // namespace poseidon
