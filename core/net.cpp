// Net construction: graph from YAML, topological order, shape inference,
// gradient paths and flat parameter buffers.
#include "core/net.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/blob_types.h"
#include "core/config_blocks.h"
#include "core/device_memory.h"
#include "core/registry.h"
#include "core/suggest.h"

namespace poseidon {

namespace {
constexpr int64_t kAlign = 16;  // floats: every parameter view starts 64-byte aligned
int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool is_scalar_shape(const Shape& s) { return shape_numel(s) == 1; }
}  // namespace

Net::Net(const ConfigNode& model, int64_t batch, Device device) : batch_(batch), device_(device) {
  POSEIDON_REQUIRE(batch > 0) << "batch size must be positive, got " << batch;
  device_memory::require(device_);
  build_graph(model);
  infer_shapes();
  mark_gradient_paths();
  bind_params();
}

Net::Net(const ConfigNode& model, int64_t batch, ShapesOnly only) : batch_(batch), allocated_(false), budget_(only) {
  POSEIDON_REQUIRE(batch > 0) << "batch size must be positive, got " << batch;
  build_graph(model);
  infer_shapes();
  mark_gradient_paths();
}

void Net::build_graph(const ConfigNode& source) {
  const ConfigNode model = expand_model_blocks(source, &switched_by_);
  model.check_keys({"name", "description", "vars", "blocks", "inputs", "layers"});
  name_ = model.get_string("name", "net");
  ConfigNode inputs = model.child("inputs");
  if (!inputs.is_map() || inputs.keys().empty())
    inputs.fail("expected a map of input names to per-sample shapes, e.g. {data: [1, 28, 28], label: []}");
  for (const std::string& in : inputs.keys()) {
    ConfigNode shape_node = inputs.child(in);
    Shape shape;
    if (!shape_node.is_sequence() || shape_node.size() > 0) shape = shape_node.as_int_list();
    for (int64_t d : shape)
      if (d <= 0) shape_node.fail("expected positive dimensions, found " + shape_str(shape));
    input_names_.push_back(in);
    input_shapes_[in] = shape;
    input_nodes_.emplace(in, shape_node);
    blob_index_[in] = blobs_.size();
    blobs_.push_back(Blob{in, Tensor::on(device_), Tensor::on(device_), false, -1});
  }
  order_layers(model.child("layers"));
}

void Net::order_layers(const ConfigNode& layers_node) {
  if (!layers_node.is_sequence() || layers_node.size() == 0) layers_node.fail("expected a non-empty list of layers");
  std::vector<std::unique_ptr<Layer>> parsed;
  std::vector<ConfigNode> configs;
  std::set<std::string> names;
  std::vector<std::string> previous = {input_names_.front()};
  for (size_t i = 0; i < layers_node.size(); ++i) {
    ConfigNode c = layers_node.at(i);
    auto layer = LayerRegistry::instance().create(c, device_);
    if (!names.insert(layer->name()).second) c.child("name").fail("duplicate layer name '" + layer->name() + "'");
    apply_own_precision(*layer, c);
    layer->set_default_inputs(previous);
    previous = layer->outputs();
    auto [lo, hi] = layer->input_count();
    int n_in = static_cast<int>(layer->inputs().size());
    if (n_in < lo || (hi >= 0 && n_in > hi))
      (c.has("inputs") ? c.child("inputs") : c)
            .fail("layer '" + layer->name() + "' (" + layer->type() + ") takes " +
                  (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + (hi < 0 ? "any" : std::to_string(hi))) +
                  " inputs, got " + std::to_string(n_in));
    if (static_cast<int>(layer->outputs().size()) != layer->output_count())
      (c.has("outputs") ? c.child("outputs") : c)
          .fail("layer '" + layer->name() + "' (" + layer->type() + ") has " +
                std::to_string(layer->output_count()) + " outputs, got " +
                std::to_string(layer->outputs().size()));
    configs.push_back(c);
    parsed.push_back(std::move(layer));
  }

  // Who produces each blob.
  std::map<std::string, int> producer;
  for (const auto& in : input_names_) producer[in] = -1;
  for (size_t i = 0; i < parsed.size(); ++i) {
    for (const auto& out : parsed[i]->outputs()) {
      auto it = producer.find(out);
      if (it != producer.end()) {
        std::string other = it->second < 0 ? "the net inputs" : "layer '" + parsed[it->second]->name() + "'";
        (configs[i].has("outputs") ? configs[i].child("outputs") : configs[i].child("name"))
            .fail("blob '" + out + "' is already produced by " + other + " (each blob has one producer)");
      }
      producer[out] = static_cast<int>(i);
    }
  }
  for (size_t i = 0; i < parsed.size(); ++i) {
    for (const auto& in : parsed[i]->inputs()) {
      if (producer.count(in)) continue;
      std::string known;
      std::vector<std::string> blobs;
      for (const auto& [name, p] : producer) {
        known += (known.empty() ? "" : ", ") + name;
        blobs.push_back(name);
      }
      (configs[i].has("inputs") ? configs[i].child("inputs") : configs[i])
          .fail("layer '" + parsed[i]->name() + "' reads blob '" + in + "', which no layer or net input produces" +
                did_you_mean(in, blobs) + " (blobs: " + known + ")");
    }
  }

  // Kahn's algorithm; among ready layers the earliest in the file goes first.
  std::vector<int> pending(parsed.size(), 0);
  for (size_t i = 0; i < parsed.size(); ++i)
    for (const auto& in : parsed[i]->inputs())
      if (producer[in] >= 0) ++pending[i];
  std::set<size_t> ready;
  for (size_t i = 0; i < parsed.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t j = 0; j < parsed.size(); ++j)
      for (const auto& in : parsed[j]->inputs())
        if (producer[in] == static_cast<int>(i) && --pending[j] == 0) ready.insert(j);
  }
  if (order.size() != parsed.size()) {
    std::string cyclic;
    size_t first = parsed.size();
    for (size_t i = 0; i < parsed.size(); ++i)
      if (pending[i] > 0) {
        cyclic += (cyclic.empty() ? "" : ", ") + parsed[i]->name();
        first = std::min(first, i);
      }
    configs[first].fail("the layer graph has a cycle through layers " + cyclic);
  }

  for (size_t i : order) {
    Layer* l = parsed[i].get();
    std::vector<size_t> out_idx;
    for (const auto& out : l->outputs()) {
      blob_index_[out] = blobs_.size();
      out_idx.push_back(blobs_.size());
      blobs_.push_back(Blob{out, Tensor::on(device_), Tensor::on(device_), false, static_cast<int>(layers_.size())});
    }
    layer_out_.push_back(out_idx);
    layers_.push_back(std::move(parsed[i]));
  }
  for (const auto& l : layers_) {
    std::vector<size_t> in_idx;
    for (const auto& in : l->inputs()) in_idx.push_back(blob_index_.at(in));
    layer_in_.push_back(in_idx);
  }
}

std::vector<Shape> Net::layer_input_shapes(size_t i) const {
  std::vector<Shape> shapes;
  for (size_t b : layer_in_[i]) shapes.push_back(blob_shapes_[b]);
  return shapes;
}

std::vector<Shape> Net::layer_output_shapes(size_t i) const {
  std::vector<Shape> shapes;
  for (size_t b : layer_out_[i]) shapes.push_back(blob_shapes_[b]);
  return shapes;
}

std::vector<Shape> Net::reshape_layer(size_t i) {
  auto it = switched_by_.find(layers_[i]->name());
  if (it == switched_by_.end()) return layers_[i]->reshape(layer_input_shapes(i));
  // A layer an `if` keeps (Inception's auxiliary head) may not fit the input
  // size asked for; the way out is the variable that leaves it out.
  const std::string hint = "; layer '" + layers_[i]->name() + "' is in the model because vars." + it->second +
                           " is true: --set net.vars." + it->second + "=false leaves it out";
  try {
    return layers_[i]->reshape(layer_input_shapes(i));
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    throw ConfigError(e.where(), what.substr(std::min(what.size(), e.where().str().size() + 2)) + hint);
  } catch (const Error& e) {
    throw Error(e.what() + hint);
  }
}

void Net::infer_shapes() {
  blob_shapes_.assign(blobs_.size(), Shape{});
  for (const auto& in : input_names_) {
    Shape s = {batch_};
    for (int64_t d : input_shapes_.at(in)) s.push_back(d);
    blob_shapes_[blob_index_.at(in)] = s;
  }
  blob_types_.assign(blobs_.size(), DType::f32);
  reads_copy_.assign(layers_.size(), {});
  require_fits_alone(-1);
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::vector<Shape> out;
    try {
      out = reshape_layer(i);
    } catch (const std::bad_alloc&) {
      std::string shapes;
      for (const Shape& in : layer_input_shapes(i)) shapes += (shapes.empty() ? "" : ", ") + shape_str(in);
      throw ConfigError(layers_[i]->config().location(), "layer '" + layers_[i]->name() + "' (" +
                                                             layers_[i]->type() + "): its working buffers for input " +
                                                             shapes + " do not fit in memory");
    }
    POSEIDON_CHECK(out.size() == layer_out_[i].size()) << layers_[i]->name();
    for (size_t k = 0; k < out.size(); ++k) blob_shapes_[layer_out_[i][k]] = out[k];
    assign_blob_types(i);
    require_fits_alone(static_cast<int>(i));
  }
  if (allocated_) {
    std::vector<bool> copied(blobs_.size(), false);
    for (size_t i = 0; i < layers_.size(); ++i)
      for (size_t k = 0; k < layer_in_[i].size(); ++k)
        if (reads_copy_[i][k]) copied[layer_in_[i][k]] = true;
    for (size_t b = 0; b < blobs_.size(); ++b) {
      Blob& blob = blobs_[b];
      if (blob.shares < 0) {
        blob.value.set_dtype(blob_types_[b]);
        blob.value.resize(blob_shapes_[b]);
      }
      if (!copied[b]) {
        blob.f32_value = Tensor();
        blob.f32_grad = Tensor();
        continue;
      }
      if (!blob.f32_value.defined()) blob.f32_value = Tensor::on(device_);
      blob.f32_value.resize(blob_shapes_[b]);
    }
    share_fused_blobs();
  }
  io_.assign(layers_.size(), LayerIO{});
  for (size_t i = 0; i < layers_.size(); ++i) {
    LayerIO& io = io_[i];
    for (size_t k = 0; k < layer_in_[i].size(); ++k) {
      Blob& in = blobs_[layer_in_[i][k]];
      io.in.push_back(reads_copy_[i][k] ? &in.f32_value : &in.value);
      io.in_grad.push_back(nullptr);
    }
    for (size_t b : layer_out_[i]) {
      io.out.push_back(&blobs_[b].value);
      io.out_grad.push_back(&blobs_[b].grad);
    }
  }
}

void Net::assign_blob_types(size_t i) {
  std::vector<DType> in;
  for (size_t b : layer_in_[i]) in.push_back(blob_types_[b]);
  DType read = DType::f32, write = DType::f32;
  // A GPU layer declares the types its kernels take, as its CPU version does.
  const auto* typed = dynamic_cast<const BlobTypes*>(layers_[i].get());
  if (typed) {
    read = typed->reads(in);
    write = typed->writes(read);
  }
  reads_copy_[i].assign(in.size(), false);
  for (size_t k = 0; k < in.size(); ++k) {
    POSEIDON_CHECK(in[k] == read || read == DType::f32)
        << "layer '" << layers_[i]->name() << "' reads bf16 from float32 blob '" << blobs_[layer_in_[i][k]].name << "'";
    reads_copy_[i][k] = in[k] != read;
  }
  for (size_t b : layer_out_[i]) blob_types_[b] = write;
}

bool Net::output_copied_to_f32(size_t i, size_t k) const {
  const size_t blob = layer_out_[i][k];
  for (size_t j = 0; j < layers_.size(); ++j)
    for (size_t r = 0; r < layer_in_[j].size(); ++r)
      if (layer_in_[j][r] == blob && reads_copy_[j][r]) return true;
  return false;
}

int64_t Net::blob_bytes() const {
  int64_t bytes = 0;
  for (const Blob& b : blobs_)
    if (b.shares < 0) bytes += b.value.bytes() + b.grad.bytes() + b.f32_value.bytes() + b.f32_grad.bytes();
  return bytes;
}

void Net::mark_gradient_paths() {
  loss_outputs_.clear();
  metric_outputs_.clear();
  std::vector<bool> reaches_loss(blobs_.size(), false);
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (size_t b : layer_out_[i]) {
      if (layers_[i]->loss_weight() != 0.f) {
        POSEIDON_REQUIRE(is_scalar_shape(blob_shapes_[b]))
            << "loss layer '" << layers_[i]->name() << "' must output a scalar";
        loss_outputs_.push_back(blobs_[b].name);
        reaches_loss[b] = true;
      } else if (!layers_[i]->differentiable() && is_scalar_shape(blob_shapes_[b])) {
        metric_outputs_.push_back(blobs_[b].name);
      }
    }
  }
  std::vector<bool> layer_on_path(layers_.size(), false);
  for (size_t i = layers_.size(); i-- > 0;) {
    for (size_t b : layer_out_[i]) layer_on_path[i] = layer_on_path[i] || reaches_loss[b];
    if (layer_on_path[i] && layers_[i]->differentiable())
      for (size_t b : layer_in_[i]) reaches_loss[b] = true;
  }
  runs_backward_.assign(layers_.size(), false);
  for (auto& b : blobs_) b.needs_grad = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    bool learnable = false;
    for (const auto& p : layers_[i]->params()) learnable = learnable || p.learnable;
    bool any_input_grad = false;
    for (size_t k = 0; k < layer_in_[i].size(); ++k) {
      Blob& in = blobs_[layer_in_[i][k]];
      any_input_grad = any_input_grad || in.needs_grad;
    }
    runs_backward_[i] = layer_on_path[i] && layers_[i]->differentiable() && (learnable || any_input_grad);
    for (size_t b : layer_out_[i]) blobs_[b].needs_grad = runs_backward_[i] && reaches_loss[b];
  }
  // A copy's gradient is rounded into the blob's once its last reader in
  // backward, the first in forward's order, has run.
  rounds_after_.assign(layers_.size(), {});
  std::vector<bool> copy_grad(blobs_.size(), false);
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (!runs_backward_[i]) continue;
    if (allocated_)
      for (size_t b : layer_out_[i])
        if (blobs_[b].shares < 0) {
          blobs_[b].grad.set_dtype(blob_types_[b]);
          blobs_[b].grad.resize(blob_shapes_[b]);
        }
    for (size_t k = 0; k < layer_in_[i].size(); ++k) {
      const size_t b = layer_in_[i][k];
      Blob& in = blobs_[b];
      io_[i].in_grad[k] = !in.needs_grad ? nullptr : reads_copy_[i][k] ? &in.f32_grad : &in.grad;
      if (!in.needs_grad || !reads_copy_[i][k] || copy_grad[b]) continue;
      copy_grad[b] = true;
      rounds_after_[i].push_back(b);
    }
  }
  for (size_t b = 0; b < blobs_.size() && allocated_; ++b) {
    if (!copy_grad[b]) {
      blobs_[b].f32_grad = Tensor();
      continue;
    }
    if (!blobs_[b].f32_grad.defined()) blobs_[b].f32_grad = Tensor::on(device_);
    blobs_[b].f32_grad.resize(blob_shapes_[b]);
  }
  if (allocated_) share_fused_blobs();
  plan_input_grad_writes();
}

void Net::bind_params() {
  int64_t n_values = 0, n_buffers = 0;
  for (auto* p : params()) (p->learnable ? n_values : n_buffers) += aligned(shape_numel(p->shape));
  auto values = std::make_shared<Storage>(n_values, device_);
  auto grads = std::make_shared<Storage>(n_values, device_);
  auto buffers = std::make_shared<Storage>(n_buffers, device_);
  int64_t off_v = 0, off_b = 0;
  for (auto* p : params()) {
    if (p->learnable) {
      p->value = Tensor(values, off_v, p->shape);
      p->grad = Tensor(grads, off_v, p->shape);
      off_v += aligned(p->value.numel());
    } else {
      p->value = Tensor(buffers, off_b, p->shape);
      off_b += aligned(p->value.numel());
    }
  }
  flat_values_ = Tensor(values, 0, {n_values});
  flat_grads_ = Tensor(grads, 0, {n_values});
  flat_buffers_ = Tensor(buffers, 0, {n_buffers});
}

void Net::reshape(int64_t batch) {
  POSEIDON_REQUIRE(batch > 0) << "batch size must be positive, got " << batch;
  if (batch == batch_) return;
  batch_ = batch;
  infer_shapes();
  mark_gradient_paths();
}

void Net::apply_own_precision(Layer& layer, const ConfigNode& config) const {
  if (!layer.own_precision()) return;
  const Precision own = *layer.own_precision();
  const ConfigNode key = config.child("precision");
  if (!layer.supports_precision(own))
    key.fail("layer '" + layer.name() + "' (" + layer.type() + ") has no " + precision_name(own) +
             " path here: it computes in float32 in every run");
  try {
    require_precision_on(own, device_);
  } catch (const Error& e) {
    key.fail(e.what());
  }
  layer.set_precision(precision_);
}

void Net::set_precision(Precision precision) {
  if (precision == precision_) return;
  require_precision_on(precision, device_);
  if (precision == Precision::tf32)
    for (auto& l : layers_)
      if (l->own_precision() == Precision::fp32)
        l->config().child("precision").fail("layer '" + l->name() +
                                            "' keeps float32, which a tf32 run cannot give one layer: TF32 is "
                                            "the GPU's math for every layer of the run");
  // Before the layers reshape: a GPU convolution picks its algorithms and
  // math type there.
  if (device_.is_cuda()) device_memory::set_tf32(device_, precision == Precision::tf32);
  precision_ = precision;
  for (auto& l : layers_) l->set_precision(precision);
  infer_shapes();
  mark_gradient_paths();
}

void Net::init_params(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Param* p : params()) {
    const ParamInit& init = p->init;
    // Drawn on the host in every case, so a GPU run starts from the same numbers.
    Tensor host = p->value.is_cuda() ? Tensor(p->shape) : p->value;
    float* w = host.data();
    int64_t n = p->value.numel();
    auto uniform = [&](double lo, double hi) {
      std::uniform_real_distribution<double> d(lo, hi);
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(d(rng));
    };
    auto gaussian = [&](double stddev) {
      std::normal_distribution<double> d(0.0, stddev);
      for (int64_t i = 0; i < n; ++i) w[i] = static_cast<float>(d(rng));
    };
    const double fan_in = static_cast<double>(std::max<int64_t>(1, init.fan_in));
    const double fan_out = static_cast<double>(std::max<int64_t>(1, init.fan_out));
    if (init.type == "constant") host.fill(init.value);
    else if (init.type == "uniform") uniform(init.low, init.high);
    else if (init.type == "gaussian") gaussian(init.std);
    else if (init.type == "xavier") uniform(-std::sqrt(6.0 / (fan_in + fan_out)), std::sqrt(6.0 / (fan_in + fan_out)));
    else if (init.type == "msra") gaussian(std::sqrt(2.0 / fan_in));
    else uniform(-1.0 / std::sqrt(fan_in), 1.0 / std::sqrt(fan_in));
    if (p->value.is_cuda()) p->value.copy_from(host);
  }
  values_written(params());
}

const Shape& Net::input_sample_shape(const std::string& name) const {
  auto it = input_shapes_.find(name);
  POSEIDON_REQUIRE(it != input_shapes_.end()) << "the model has no input '" << name << "'";
  return it->second;
}

Blob& Net::blob(const std::string& name) {
  auto it = blob_index_.find(name);
  POSEIDON_REQUIRE(it != blob_index_.end()) << "the model has no blob '" << name << "'";
  return blobs_[it->second];
}

std::vector<Param*> Net::params() {
  std::vector<Param*> out;
  for (auto& l : layers_)
    for (auto& p : l->params()) out.push_back(&p);
  return out;
}

Param* Net::find_param(const std::string& name) {
  for (auto& l : layers_)
    for (auto& p : l->params())
      if (p.name == name) return &p;
  return nullptr;
}

int64_t Net::num_learnable() const {
  int64_t n = 0;
  for (const auto& l : layers_)
    for (const auto& p : l->params())
      if (p.learnable) n += shape_numel(p.shape);
  return n;
}

}  // namespace poseidon
