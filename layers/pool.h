// 2-D max and average pooling over NCHW input with exactly the semantics of
// PyTorch's MaxPool2d / AvgPool2d: padding never wins a max, ceil_mode adds a
// last partial window only if it starts inside the input or the left padding,
// and count_include_pad chooses whether padding counts in the average divisor.
// Max pooling remembers each window's argmax for backward. Declared here so
// that the GPU implementation (pool.cu) can take over forward and backward.
// The CPU runs plain loops: oneDNN 2.6's pooling on NCHW was faster forward
// but slower backward, and slower in all (docs/BENCHMARK_HISTORY.md). On
// bfloat16 blobs (core/blob_types.h) the same kernels run on each run of
// planes widened into float32, and the results are rounded once.
#pragma once

#include <array>
#include <cstdint>

#include "core/blob_types.h"
#include "core/im2col.h"
#include "core/layer.h"

namespace poseidon {

// What the CPU kernels (pool_kernels.h) need to know of a layer's windows.
struct PoolGeometry {
  int64_t in_h, in_w, out_h, out_w;
  std::array<int64_t, 2> kernel, stride, pad;             // [h, w]
  const OutputSpan* column_spans;                         // per kernel column: outputs reading real input
  const float *row_divisors, *col_divisors, *col_scales;  // avg only: per output row, column; 1 / column's
};

class PoolLayer : public Layer, public BlobTypes {
 public:
  explicit PoolLayer(const ConfigNode& c);

  std::vector<Shape> reshape(const std::vector<Shape>& in) override;
  void forward(LayerIO& io, RunContext& ctx) override;
  void backward(LayerIO& io, RunContext& ctx) override;
  // Backward writes an input gradient that holds nothing yet rather than
  // adding to it (LayerIO::in_grad_unset).
  bool writes_input_grads() const override { return true; }
  int64_t forward_flops(const std::vector<Shape>& in) const override;
  DType reads(const std::vector<DType>& in) const override {
    return moved_type(in, own_precision() == Precision::fp32);
  }
  DType writes(DType read) const override { return read; }

 protected:
  bool max_ = true, global_ = false, ceil_mode_ = false, count_include_pad_ = true;
  std::array<int64_t, 2> kernel_{}, stride_{}, pad_{};  // [h, w]; set from the input when global
  Shape in_shape_;
  int64_t out_h_ = 0, out_w_ = 0;

 private:
  template <class Kernel>
  void for_plane_runs(Kernel kernel) const;
  PoolGeometry geometry() const;

  std::vector<int32_t> argmax_;                     // per output: index of the max within its input plane
  std::vector<float> row_divisors_, col_divisors_;  // avg: per output row and column
  std::vector<float> col_scales_;                   // avg: 1 / col_divisors_
  std::vector<OutputSpan> column_spans_;            // per kernel column: outputs reading real input
  bool whole_plane_ = false;                        // one window covering the whole unpadded plane
};

}  // namespace poseidon
