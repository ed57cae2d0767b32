// What the parts of the extension module share: NumPy views of tensors and
// the functions that register each part's classes.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <random>

#include "core/net.h"
#include "core/precision.h"

namespace poseidon::python {

namespace py = pybind11;

// A NumPy array of `tensor`: a view of its memory when that is the host's
// (the array keeps the memory alive; writes reach the tensor), else a copy.
py::array view_of(const Tensor& tensor);

// Copies `array` (any numeric type, converted to float32) into `tensor`,
// whose shape it must have; `what` names the tensor in the error.
void copy_into(Tensor& tensor, const py::handle& array, const std::string& what);

// A Net as Python sees it: one it built (owned) or the Trainer's (borrowed;
// the Python object then keeps the Trainer alive), with the random state its
// stochastic layers (dropout) draw from in forward and backward.
struct PyNet {
  std::unique_ptr<Net> owned;
  Net* net = nullptr;
  std::mt19937_64 rng;

  // Built as training builds it: parameters from `seed`, ReLUs fused.
  static std::unique_ptr<PyNet> build(const ConfigNode& model, int64_t batch, Device device, uint64_t seed,
                                      Precision precision);
  static std::unique_ptr<PyNet> borrow(Net& net, uint64_t seed);
  Param& param(const std::string& name);
  Blob& blob(const std::string& name);
  RunContext context(bool train) { return RunContext{train ? Phase::train : Phase::test, &rng, net->device()}; }
};

void bind_nets(py::module_& m);      // load_model, Net, Solver
void bind_training(py::module_& m);  // load_config, TrainConfig, Trainer, rank, world_size

}  // namespace poseidon::python
