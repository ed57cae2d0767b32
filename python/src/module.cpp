// The extension module poseidon._poseidon: registers the bindings of each
// part (nets, training) and turns the engine's errors into Python
// exceptions that carry the CLI's messages: poseidon.ConfigError (a
// ValueError) for bad input, as the CLI's exit status 2, poseidon.Error (a
// RuntimeError) for the rest.
#include <yaml-cpp/exceptions.h>

#include "core/error.h"
#include "python/src/bindings.h"

PYBIND11_MODULE(_poseidon, m) {
  namespace py = pybind11;
  using namespace poseidon::python;
  m.doc() = "Poseidon's engine, configs and Trainer";
  m.attr("__version__") = POSEIDON_VERSION;
  static py::exception<poseidon::Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<poseidon::ConfigError> config_error(m, "ConfigError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const poseidon::ConfigError& e) {
      config_error(e.what());
    } catch (const poseidon::Error& e) {
      error(e.what());
    } catch (const YAML::Exception& e) {
      config_error((std::string("YAML: ") + e.what()).c_str());
    }
  });
  bind_nets(m);
  bind_training(m);
}
