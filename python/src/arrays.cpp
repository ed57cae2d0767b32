// Tensors as NumPy arrays (host memory is shared, never copied, and the
// array holds a reference to the tensor's storage so it outlives the Net),
// and the Net that Python's arrays come from.
#include <cstring>

#include "core/error.h"
#include "python/src/bindings.h"

namespace poseidon::python {

py::array view_of(const Tensor& tensor) {
  if (tensor.is_cuda()) return view_of(tensor.to(Device{}));
  auto* kept = new Tensor(tensor);  // shares the storage
  py::capsule owner(kept, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  return py::array_t<float>(shape, kept->data(), owner);
}

std::unique_ptr<PyNet> PyNet::build(const ConfigNode& model, int64_t batch, Device device, uint64_t seed,
                                    Precision precision) {
  auto n = std::make_unique<PyNet>();
  n->owned = std::make_unique<Net>(model, batch, device);
  n->net = n->owned.get();
  n->rng.seed(seed);
  n->net->set_precision(precision);
  n->net->init_params(seed);
  n->net->fuse_relus();
  return n;
}

std::unique_ptr<PyNet> PyNet::borrow(Net& net, uint64_t seed) {
  auto n = std::make_unique<PyNet>();
  n->net = &net;
  n->rng.seed(seed);
  return n;
}

Param& PyNet::param(const std::string& name) {
  Param* p = net->find_param(name);
  if (!p) throw Error("no parameter '" + name + "' in model '" + net->name() + "'");
  return *p;
}

Blob& PyNet::blob(const std::string& name) {
  if (!net->has_blob(name)) throw Error("no blob '" + name + "' in model '" + net->name() + "'");
  return net->blob(name);
}

void copy_into(Tensor& tensor, const py::handle& array, const std::string& what) {
  auto values = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!values) throw Error(what + ": expected a numeric array");
  const Shape shape(values.shape(), values.shape() + values.ndim());
  if (shape != tensor.shape())
    throw Error(what + ": an array of shape " + shape_str(shape) + " where " + shape_str(tensor.shape()) +
                " is expected");
  if (!tensor.is_cuda()) {
    std::memcpy(tensor.data(), values.data(), sizeof(float) * tensor.numel());
    return;
  }
  Tensor host(tensor.shape());
  std::memcpy(host.data(), values.data(), sizeof(float) * host.numel());
  tensor.copy_from(host);
}

}  // namespace poseidon::python
