// LayerRunner: what runs the body of a layer's forward and backward for the
// Net. The default runs the layer's own code. Another runner can stand in for
// the computation without the Net knowing: emulated compute
// (dist/schemes/emulated_compute.h) waits a profiled device's time instead, so that
// gates, gradient reports and transfers see that device's timing.
#pragma once

#include <cstddef>

#include "core/layer.h"

namespace poseidon {

class LayerRunner {
 public:
  virtual ~LayerRunner() = default;
  // `index` is the layer's position in the Net's topological order.
  virtual void forward(size_t index, Layer& layer, LayerIO& io, RunContext& ctx) { layer.forward(io, ctx); }
  virtual void backward(size_t index, Layer& layer, LayerIO& io, RunContext& ctx) { layer.backward(io, ctx); }
};

}  // namespace poseidon
