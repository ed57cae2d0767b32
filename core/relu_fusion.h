// A layer that can apply the ReLU that follows it itself (Net::fuse_relus):
// it writes max(y, 0) as its output and, in backward, takes its output
// gradient as zero where that output is not positive (ReLU's backward),
// either zeroed in place first (nothing reads the gradient after the
// producer) or masked as each of its passes reads it, and runs its own
// backward on that. The separate ReLU passes over the activation, forward
// and backward, disappear. Batch norm and sum (the residual add) on the CPU
// implement it; a layer type opts in by deriving from this as well as from
// Layer.
#pragma once

namespace poseidon {

class ReluFusable {
 public:
  virtual ~ReluFusable() = default;
  // Asks the layer to apply a ReLU to its (only) output from now on; false
  // when it cannot (its GPU implementation), and nothing changes.
  virtual bool fuse_relu() = 0;
  bool relu_fused() const { return relu_fused_; }

 protected:
  bool relu_fused_ = false;
};

}  // namespace poseidon
