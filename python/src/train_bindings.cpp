// Training from Python with the CLI's Trainer: a training config (with
// --set overrides), a Python iterable of (images, labels) batches in place of
// data.train, and under mpirun the same MPI job set-up as `poseidon train`.
#include <pybind11/stl.h>

#include <cstdio>

#include "dist/runtime/comm.h"
#include "python/src/bindings.h"
#include "tools/cli/trainer.h"

namespace poseidon::python {

namespace {

// The process group: an MPI job when mpirun or srun started Python, else one
// rank. Made at the first use; each Trainer holds it, so MPI ends after the
// last of them (and after the module lets it go at exit).
std::shared_ptr<dist::World>& world_slot() {
  static std::shared_ptr<dist::World> world;
  return world;
}
std::shared_ptr<dist::World> world() {
  if (!world_slot()) world_slot() = std::make_shared<dist::World>();
  return world_slot();
}

// Batches from a Python iterable, one epoch per pass over it: at its end
// the iterable is iterated anew (an iterator, once spent, then yields nothing
// and training stops with an error naming the epoch). It reads one batch
// ahead, so that the position says where the next batch comes from, as the
// loader's does.
class PythonBatches : public BatchFeed {
 public:
  explicit PythonBatches(py::object batches) : batches_(std::move(batches)), it_(py::iter(batches_)) {}
  ~PythonBatches() override {
    py::gil_scoped_acquire gil;
    ahead_ = it_ = batches_ = py::object();
  }

  void next(Tensor& data, Tensor& labels) override {
    py::gil_scoped_acquire gil;
    const std::string where =
        "data source, epoch " + std::to_string(position_.epoch) + " batch " + std::to_string(position_.batch);
    py::object batch = ahead_ ? std::move(ahead_) : take();
    if (!batch)
      throw Error("data source: epoch " + std::to_string(position_.epoch) +
                  " yielded no batch (an iterator is spent after one pass; give an iterable)");
    if (!py::isinstance<py::sequence>(batch) || py::len(batch) != 2)
      throw Error(where + ": expected a pair (images, labels)");
    auto pair = batch.cast<py::sequence>();
    const py::object images = pair[0], batch_labels = pair[1];
    copy_into(data, images, where + ": images");
    copy_into(labels, batch_labels, where + ": labels");
    ahead_ = take();
    if (ahead_) {
      ++position_.batch;
      return;
    }
    ++position_.epoch;
    position_.batch = 0;
    it_ = py::iter(batches_);
  }
  LoaderPosition position() const override { return position_; }

 private:
  // The iterator's next item; null at its end.
  py::object take() {
    py::object item = py::reinterpret_steal<py::object>(PyIter_Next(it_.ptr()));
    if (!item && PyErr_Occurred()) throw py::error_already_set();
    return item;
  }
  py::object batches_, it_, ahead_;
  LoaderPosition position_;  // of the batch next() gives
};

// The CLI's Trainer, with the job it belongs to.
struct PyTrainer {
  std::shared_ptr<dist::World> job;
  std::unique_ptr<Trainer> trainer;
  uint64_t seed = 1;  // of the config: seeds the borrowed net's dropout

  // As `poseidon train`: a failure on one rank of several ends the whole
  // job, since the others would wait for it forever.
  template <class Work>
  auto as_job(const Work& work) {
    try {
      return work();
    } catch (const std::exception& e) {
      if (job->size() > 1) {
        std::fprintf(stderr, "error: rank %d: %s\n", job->rank(), e.what());
        std::fflush(stderr);
        job->abort(dynamic_cast<const Error*>(&e) ? 2 : 1);
      }
      throw;
    }
  }
};

py::dict result_dict(const EvalResult& r) {
  py::dict out;
  out["loss"] = r.loss;
  out["examples"] = r.examples;
  for (const auto& [name, v] : r.metrics) out[py::str(name)] = v;
  return out;
}

}  // namespace

void bind_training(py::module_& m) {
  py::class_<TrainConfig>(m, "TrainConfig", "A training config: model, data, solver and train settings")
      .def_readonly("file", &TrainConfig::file)
      .def_readonly("model", &TrainConfig::model)
      .def_readonly("seed", &TrainConfig::seed)
      .def_readonly("output_dir", &TrainConfig::output_dir)
      .def_property_readonly("device", [](const TrainConfig& c) { return c.device.str(); })
      .def_property_readonly("batch_size", [](const TrainConfig& c) { return c.train_data.batch_size; })
      .def_property_readonly("max_iter", [](const TrainConfig& c) { return c.solver.max_iter; })
      .def_readonly("warnings", &TrainConfig::warnings);
  m.def(
      "load_config",
      [](const std::string& file, const std::vector<std::string>& overrides) {
        return TrainConfig::load(file, overrides);
      },
      py::arg("file"), py::arg("overrides") = std::vector<std::string>{},
      "Loads a training config; each override is 'key=value' as the CLI's --set (solver.lr=0.1, "
      "net.layers.fc2.num_output=5)");

  py::class_<PyTrainer>(m, "Trainer", "The training loop of `poseidon train`")
      .def(py::init([](const TrainConfig& config, py::object data, const std::string& weights, bool quiet) {
             auto t = std::make_unique<PyTrainer>();
             t->job = world();
             t->seed = config.seed;
             t->trainer = t->as_job([&] {
               check_before_training(config, t->job->rank() == 0, quiet);
               TrainOptions options;
               options.weights = weights;
               options.quiet = quiet;
               options.world = t->job.get();
               if (!data.is_none()) options.feed = std::make_shared<PythonBatches>(data);
               return std::make_unique<Trainer>(config, std::move(options));
             });
             return t;
           }),
           py::arg("config"), py::arg("data") = py::none(), py::arg("weights") = "", py::arg("quiet") = false,
           "data: an iterable of (images, labels) arrays shaped as the model's inputs at the config's batch size, "
           "used in place of data.train (None: data.train)")
      .def(
          "run", [](PyTrainer& t) { return result_dict(t.as_job([&] { return t.trainer->run(); })); },
          "Trains to solver.max_iter (progress, checkpoints, metrics.jsonl as the CLI); returns the final test "
          "result (empty without data.test)")
      .def_property_readonly("iteration", [](PyTrainer& t) { return t.trainer->iteration(); })
      .def(
          "save", [](PyTrainer& t, const std::string& path) { t.as_job([&] { t.trainer->save(path); }); },
          py::arg("path"), "Writes a training checkpoint (parameters, solver state, position)")
      .def_property_readonly(
          "net", [](PyTrainer& t) { return PyNet::borrow(t.trainer->net(), t.seed); }, py::keep_alive<0, 1>(),
          "The net being trained (blobs, parameters, gradients)");

  m.def(
      "rank", [] { return world()->rank(); }, "This process's rank in the MPI job (0 alone)");
  m.def(
      "world_size", [] { return world()->size(); }, "The ranks of the MPI job (1 alone)");
  // MPI ends once nothing holds the job any more.
  py::module_::import("atexit").attr("register")(py::cpp_function([] { world_slot().reset(); }));
}

}  // namespace poseidon::python
