// Concat on the CPU (see concat.h).
#include "layers/concat.h"

#include <cstring>

#include "core/blob_types.h"
#include "core/registry.h"

namespace poseidon {

std::vector<Shape> ConcatLayer::reshape(const std::vector<Shape>& in) {
  const int64_t ndim = static_cast<int64_t>(in[0].size());
  if (axis_ < -ndim || axis_ >= ndim)
    fail("axis " + std::to_string(axis_) + " is out of range for input 0 of shape " + shape_str(in[0]), "axis");
  axis_index_ = axis_ < 0 ? axis_ + ndim : axis_;
  Shape out = in[0];
  for (size_t k = 1; k < in.size(); ++k) {
    bool match = in[k].size() == in[0].size();
    for (int64_t d = 0; match && d < ndim; ++d) match = d == axis_index_ || in[k][d] == in[0][d];
    if (!match)
      fail("input " + std::to_string(k) + " has shape " + shape_str(in[k]) + " but input 0 has " + shape_str(in[0]) +
           "; shapes must agree except on axis " + std::to_string(axis_index_));
    out[axis_index_] += in[k][axis_index_];
  }
  outer_ = shape_numel(Shape(out.begin(), out.begin() + axis_index_));
  return {out};
}

namespace {
// The first element of a float32 or bfloat16 host tensor, as bytes.
char* bytes_of(const Tensor& t) {
  return t.dtype() == DType::bf16 ? reinterpret_cast<char*>(const_cast<uint16_t*>(t.bf16_data()))
                                  : reinterpret_cast<char*>(const_cast<float*>(t.data()));
}
}  // namespace

// Rows of the inputs copied as bytes: the same code moves float32 and
// bfloat16 (core/blob_types.h), whose inputs are all of the output's type.
void ConcatLayer::forward(LayerIO& io, RunContext&) {
  const int64_t outer = outer_;
  const size_t size = dtype_size(io.out[0]->dtype());
  const int64_t out_row = io.out[0]->numel() / outer;  // elements per outer index in the output
  char* y = bytes_of(*io.out[0]);
  int64_t offset = 0;
  for (const Tensor* x : io.in) {
    const int64_t row = x->numel() / outer;
    const char* px = bytes_of(*x);
#pragma omp parallel for if (x->numel() > 65536)
    for (int64_t o = 0; o < outer; ++o) std::memcpy(y + (o * out_row + offset) * size, px + o * row * size, row * size);
    offset += row;
  }
}

void ConcatLayer::backward(LayerIO& io, RunContext&) {
  const int64_t outer = outer_;
  const int64_t out_row = io.out_grad[0]->numel() / outer;
  const bool bf16 = io.out_grad[0]->dtype() == DType::bf16;
  const size_t size = dtype_size(io.out_grad[0]->dtype());
  const char* dy = bytes_of(*io.out_grad[0]);
  int64_t offset = 0;
  for (size_t k = 0; k < io.in.size(); ++k) {
    const int64_t row = io.in[k]->numel() / outer;
    if (io.in_grad[k]) {
      char* dx = bytes_of(*io.in_grad[k]);
      const bool overwrite = io.overwrites_input_grad(k);
#pragma omp parallel for if (io.in[k]->numel() > 65536)
      for (int64_t o = 0; o < outer; ++o) {
        const char* slice = dy + (o * out_row + offset) * size;
        char* dx_row = dx + o * row * size;
        if (overwrite)
          std::memcpy(dx_row, slice, row * size);
        else if (bf16)  // the sum in float32, rounded once
          add_rounded_into_bf16_serially(reinterpret_cast<const uint16_t*>(slice), reinterpret_cast<uint16_t*>(dx_row),
                                         row);
        else
          for (int64_t i = 0; i < row; ++i)
            reinterpret_cast<float*>(dx_row)[i] += reinterpret_cast<const float*>(slice)[i];
      }
    }
    offset += row;
  }
}

POSEIDON_REGISTER_LAYER(ConcatLayer, "concat", "concatenates two or more inputs along an axis (torch.cat)",
                        {{"axis", "int", "1", "dimension to join along; negative counts from the end"}});

}  // namespace poseidon
