// Model summaries and memory estimates from a shapes-only Net.
#include "core/model_summary.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>

#include "core/device_info.h"
#include "core/net.h"

namespace poseidon {

namespace {

// Every blob but a scalar (a loss, a metric) has the batch as dimension 0:
// its shape at batch 1 becomes that at `batch`.
Shape at_batch(Shape shape, int64_t batch) {
  if (!shape.empty() && shape[0] == 1) shape[0] = batch;
  return shape;
}

double tensor_bytes(const Shape& shape, DType type = DType::f32) {
  double n = static_cast<double>(dtype_size(type));
  for (int64_t d : shape) n *= static_cast<double>(d);
  return n;
}

// Built at batch 1, a model's layers hold only one example's worth of
// working buffers. A model rejected there is built again at the real batch,
// so the error's shapes are those the user will see.
std::unique_ptr<Net> shapes_at_batch_one(const ConfigNode& model, int64_t batch, const Net::ShapesOnly& budget) {
  Net::ShapesOnly at_one = budget;
  at_one.memory_batch = batch;
  try {
    return std::make_unique<Net>(model, 1, at_one);
  } catch (const Net::BeyondMemory&) {
    // Its message names the real batch already; a build at that batch would
    // first allocate the working buffers the check refuses.
    throw;
  } catch (const Error&) {
    Net real(model, batch, budget);
    throw;
  }
}

// The container's memory limit (cgroup v2, then v1); 0 when there is none.
double cgroup_limit_bytes() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    double v = 0;
    if (in >> v && v > 0) return v;  // "max" (no limit) does not parse
  }
  return 0;
}

}  // namespace

LayerMemory& LayerMemory::operator+=(const LayerMemory& other) {
  parameters += other.parameters;
  gradients += other.gradients;
  solver_state += other.solver_state;
  activations += other.activations;
  return *this;
}

int64_t ModelSummary::params() const {
  int64_t n = 0;
  for (const LayerSummary& l : layers) n += l.params;
  return n;
}

double ModelSummary::flops() const {
  double n = 0;
  for (const LayerSummary& l : layers) n += l.flops;
  return n;
}

LayerMemory ModelSummary::memory() const {
  LayerMemory m = inputs;
  for (const LayerSummary& l : layers) m += l.memory;
  return m;
}

ModelSummary summarize_model(const ConfigNode& model, int64_t batch, bool momentum, double memory_bytes,
                             const std::string& memory_name, Precision blobs) {
  POSEIDON_REQUIRE(batch > 0) << "batch size must be positive, got " << batch;
  std::unique_ptr<Net> net = shapes_at_batch_one(model, batch, {memory_bytes, 0, memory_name});
  if (blobs == Precision::bf16) net->set_precision(blobs);
  ModelSummary s;
  s.name = net->name();
  s.batch = batch;
  s.momentum = momentum;
  auto inputs = model.find("inputs");
  s.inputs_location = inputs ? inputs->location() : model.location();
  for (const std::string& in : net->input_names()) {
    Shape shape = {batch};
    for (int64_t d : net->input_sample_shape(in)) shape.push_back(d);
    s.inputs.activations += tensor_bytes(shape);
  }
  for (size_t i = 0; i < net->num_layers(); ++i) {
    const Layer& layer = net->layer(i);
    LayerSummary l;
    l.name = layer.name();
    l.type = layer.type();
    l.location = layer.config().location();
    for (const Param& p : layer.params()) {
      const double bytes = tensor_bytes(p.shape);
      l.memory.parameters += bytes;
      if (!p.learnable) continue;
      l.params += shape_numel(p.shape);
      l.memory.gradients += bytes;
      if (momentum) l.memory.solver_state += bytes;
    }
    const std::vector<Shape> outputs = net->layer_output_shapes(i);
    for (size_t k = 0; k < outputs.size(); ++k) {
      l.outputs.push_back(at_batch(outputs[k], batch));
      // The value and, where backward needs it, the gradient, in the blob's
      // type, and so the float32 copy that float32 readers of a bfloat16
      // blob share.
      const double copies = net->output_needs_grad(i, k) ? 2 : 1;
      l.memory.activations += tensor_bytes(l.outputs.back(), net->output_type(i, k)) * copies;
      if (net->output_copied_to_f32(i, k)) l.memory.activations += tensor_bytes(l.outputs.back()) * copies;
    }
    std::vector<Shape> in_shapes = net->layer_input_shapes(i);
    for (Shape& shape : in_shapes) shape = at_batch(shape, batch);
    l.flops = static_cast<double>(layer.forward_flops(in_shapes));
    s.layers.push_back(std::move(l));
  }
  return s;
}

double device_memory_bytes(const Device& device) {
  if (device.is_cuda()) {
    for (const device_info::Gpu& gpu : device_info::visible_gpus())
      if (gpu.index == device.index) return static_cast<double>(gpu.memory_bytes);
    return 0;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
  const double physical = pages > 0 && page_bytes > 0 ? static_cast<double>(pages) * page_bytes : 0;
  const double limit = cgroup_limit_bytes();
  if (physical <= 0) return limit;
  return limit > 0 ? std::min(physical, limit) : physical;
}

void require_memory(const ModelSummary& s, const Device& device, double available) {
  const LayerMemory need = s.memory();
  if (available <= 0 || need.total() <= available) return;
  SourceLocation where = s.inputs_location;
  std::string largest = "the inputs";
  double most = s.inputs.total();
  for (const LayerSummary& l : s.layers) {
    if (l.memory.total() <= most) continue;
    most = l.memory.total();
    where = l.location;
    largest = "layer '" + l.name + "'";
  }
  const std::string has = memory_name(device, available);
  throw ConfigError(where, "training '" + s.name + "' at batch " + std::to_string(s.batch) + " needs about " +
                               bytes_text(need.total()) + " (parameters " + bytes_text(need.parameters) +
                               ", gradients " + bytes_text(need.gradients) + ", solver state " +
                               bytes_text(need.solver_state) + ", activations " + bytes_text(need.activations) +
                               "), more than " + has + "; the largest part is " + largest + " (" +
                               bytes_text(most) + "; poseidon summary shows every layer's share)");
}

std::string memory_name(const Device& device, double bytes) {
  return device.is_cuda() ? "the " + bytes_text(bytes) + " of GPU " + device.str()
                          : "this machine's " + bytes_text(bytes) + " of memory";
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

}  // namespace poseidon
