// Models, nets and solvers from Python: load a model file, build a Net on a
// device, feed it arrays, run forward and backward, read blobs, parameters
// and gradients as NumPy arrays, and apply a solver step.
#include <pybind11/stl.h>

#include <random>

#include "core/checkpoint.h"
#include "core/net.h"
#include "core/solver.h"
#include "python/src/bindings.h"
#include "tools/cli/train_config.h"

namespace poseidon::python {

namespace {

// Backward that applies nothing: every gradient stays in its parameter for
// the caller to read or for Solver.step.
class KeepGradients : public GradSink {
 public:
  void grad_ready(Param&) override {}
};

std::unique_ptr<PyNet> net_of_config(const TrainConfig& config) {
  return PyNet::build(config.model, config.train_data.batch_size, config.device, config.seed, config.precision);
}

}  // namespace

void bind_nets(py::module_& m) {
  py::class_<ConfigNode>(m, "Model", "A model tree (a model file with its overrides applied)")
      .def_property_readonly("file", [](const ConfigNode& n) { return n.location().file; });
  m.def(
      "load_model",
      [](const std::string& file, const std::vector<std::string>& overrides) { return load_model(file, overrides); },
      py::arg("file"), py::arg("overrides") = std::vector<std::string>{},
      "Loads a model YAML; each override is 'key=value' as the CLI's --set (layers.fc2.num_output=5)");

  py::class_<PyNet>(m, "Net", "A layer graph built on a device, its parameters initialised from a seed")
      .def(py::init([](const ConfigNode& model, int64_t batch, const std::string& device, uint64_t seed) {
             return PyNet::build(model, batch, Device::parse(device), seed, Precision::fp32);
           }),
           py::arg("model"), py::arg("batch"), py::arg("device") = "cpu", py::arg("seed") = 1)
      .def(py::init([](const TrainConfig& config) { return net_of_config(config); }), py::arg("config"),
           "The net a training config trains: its model, batch size, device, precision and seed")
      .def_property_readonly("name", [](PyNet& n) { return n.net->name(); })
      .def_property_readonly("batch", [](PyNet& n) { return n.net->batch(); })
      .def_property_readonly("device", [](PyNet& n) { return n.net->device().str(); })
      .def_property_readonly("inputs", [](PyNet& n) { return n.net->input_names(); })
      .def_property_readonly("blob_names",
                             [](PyNet& n) {
                               std::vector<std::string> names;
                               for (const Blob& b : n.net->blobs()) names.push_back(b.name);
                               return names;
                             })
      .def_property_readonly("param_names",
                             [](PyNet& n) {
                               std::vector<std::string> names;
                               for (Param* p : n.net->params()) names.push_back(p->name);
                               return names;
                             })
      .def(
          "set_input",
          [](PyNet& n, const std::string& name, const py::handle& array) {
            copy_into(n.blob(name).value, array, "input '" + name + "'");
          },
          py::arg("name"), py::arg("array"))
      .def(
          "feed",
          [](PyNet& n, const py::handle& images, const py::handle& labels) {
            const auto& inputs = n.net->input_names();
            if (inputs.size() < 2) throw Error("model '" + n.net->name() + "' has no second input for labels");
            copy_into(n.net->blob(inputs[0]).value, images, "images (input '" + inputs[0] + "')");
            copy_into(n.net->blob(inputs[1]).value, labels, "labels (input '" + inputs[1] + "')");
          },
          py::arg("images"), py::arg("labels"), "Copies a batch into the first two inputs")
      .def(
          "forward",
          [](PyNet& n, bool train) {
            // Parameters are writable arrays here (param, params): a write
            // after the solver's step leaves no stale copy rounded to bfloat16.
            values_written(n.net->params());
            RunContext ctx = n.context(train);
            return n.net->forward(ctx);
          },
          py::arg("train") = true, "Runs every layer; returns the loss")
      .def(
          "backward",
          [](PyNet& n) {
            RunContext ctx = n.context(true);
            KeepGradients keep;
            n.net->backward(ctx, keep);
          },
          "Computes every gradient of the last forward's loss; applies none")
      .def(
          "reshape", [](PyNet& n, int64_t batch) { n.net->reshape(batch); }, py::arg("batch"),
          "Changes the batch size (arrays taken before keep the old tensors)")
      .def(
          "blob", [](PyNet& n, const std::string& name) { return view_of(n.blob(name).value); }, py::arg("name"))
      .def(
          "blob_grad",
          [](PyNet& n, const std::string& name) {
            Blob& b = n.blob(name);
            if (!b.grad.defined()) throw Error("blob '" + name + "' has no gradient (nothing differentiable reads it)");
            return view_of(b.grad);
          },
          py::arg("name"))
      .def(
          "param", [](PyNet& n, const std::string& name) { return view_of(n.param(name).value); }, py::arg("name"))
      .def(
          "grad",
          [](PyNet& n, const std::string& name) {
            Param& p = n.param(name);
            if (!p.learnable) throw Error("'" + name + "' is a buffer: it has no gradient");
            return view_of(p.grad);
          },
          py::arg("name"))
      .def_property_readonly("params",
                             [](PyNet& n) {
                               py::dict out;
                               for (Param* p : n.net->params()) out[py::str(p->name)] = view_of(p->value);
                               return out;
                             })
      .def_property_readonly("grads",
                             [](PyNet& n) {
                               py::dict out;
                               for (Param* p : n.net->params())
                                 if (p->learnable) out[py::str(p->name)] = view_of(p->grad);
                               return out;
                             })
      .def(
          "load", [](PyNet& n, const std::string& path) { load_checkpoint(path, *n.net, nullptr); }, py::arg("path"),
          "Loads parameters from a safetensors file (a checkpoint or exported weights)")
      .def(
          "save", [](PyNet& n, const std::string& path) { save_checkpoint(path, *n.net, nullptr, {}); },
          py::arg("path"));

  py::class_<Solver>(m, "Solver", "The update rule of a training config's solver section")
      .def(py::init([](const TrainConfig& config) { return std::make_unique<Solver>(config.solver); }),
           py::arg("config"))
      .def_property("iteration", &Solver::iteration, &Solver::set_iteration)
      .def_property_readonly("lr", &Solver::lr)
      .def(
          "step",
          [](Solver& s, PyNet& n) {
            for (Param* p : n.net->params())
              if (p->learnable) s.update(*p);
            s.set_iteration(s.iteration() + 1);
          },
          py::arg("net"), "Applies the gradients of the last backward to the parameters, then counts the iteration");
}

}  // namespace poseidon::python
