// Kernels over float32 or bfloat16 tensors (ARCHITECTURE.md, "Element
// types"): one kernel template reads each element as a float and writes a
// float result in the tensor's own type, rounded once to nearest even for a
// bfloat16 one (core/bf16.h, as the CPU rounds); and the host side that calls
// a lambda with a tensor's elements as `float*` or `uint16_t*` (bfloat16
// bits), so that a layer's kernel is written once for both types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "core/tensor.h"

namespace poseidon::cuda {

template <class T>
__device__ inline float load(const T* p, size_t i) {
  return as_float(p[i]);
}
template <class T>
__device__ inline void store(T* p, size_t i, float v) {
  store_float(p[i], v);
}

// The elements of `t` as the pointer of its type (bfloat16 as bits).
template <class T>
T* elements(const Tensor& t);
template <>
inline float* elements<float>(const Tensor& t) {
  return const_cast<float*>(t.data());
}
template <>
inline uint16_t* elements<uint16_t>(const Tensor& t) {
  return const_cast<uint16_t*>(t.bf16_data());
}

// fn(T{}) with T the element type of `type`: float or uint16_t.
template <class Fn>
void with_element_type(DType type, Fn&& fn) {
  if (type == DType::bf16)
    fn(uint16_t{});
  else
    fn(float{});
}

}  // namespace poseidon::cuda
