// HostFallbackLayer: the copies around a CPU layer in a GPU net.
#include "core/host_fallback_layer.h"

namespace poseidon {

HostFallbackLayer::HostFallbackLayer(const ConfigNode& config, std::unique_ptr<Layer> cpu_layer)
    : Layer(config), cpu_(std::move(cpu_layer)) {}

std::vector<Shape> HostFallbackLayer::reshape(const std::vector<Shape>& in) {
  cpu_->set_precision(precision());  // resolved by the Net, the layer's own key included
  std::vector<Shape> out = cpu_->reshape(in);
  // The Net binds this layer's parameters on the GPU; the CPU layer's own
  // stay on the host and are synchronised around each call.
  for (Param& p : cpu_->params()) {
    Param& mirror = declare_param(p.name.substr(name().size() + 1), p.shape, p.init, p.learnable);
    mirror.lr_mult = p.lr_mult;
    mirror.decay_mult = p.decay_mult;
    if (p.value.shape() != p.shape) p.value = Tensor(p.shape);
    if (p.learnable && p.grad.shape() != p.shape) p.grad = Tensor(p.shape);
  }
  auto host = [](std::vector<Tensor>& tensors, const std::vector<Shape>& shapes) {
    tensors.clear();
    for (const auto& s : shapes) tensors.emplace_back(s);
  };
  host(in_, in);
  host(in_grad_, in);
  host(out_, out);
  host(out_grad_, out);
  return out;
}

void HostFallbackLayer::forward(LayerIO& io, RunContext& ctx) {
  for (size_t k = 0; k < params().size(); ++k) cpu_->param(k).value.copy_from(param(k).value);
  host_io_ = LayerIO{};
  for (size_t k = 0; k < in_.size(); ++k) {
    in_[k].copy_from(*io.in[k]);
    host_io_.in.push_back(&in_[k]);
  }
  for (auto& t : out_) host_io_.out.push_back(&t);
  RunContext host_ctx = ctx;
  host_ctx.device = Device{};
  cpu_->forward(host_io_, host_ctx);
  for (size_t k = 0; k < out_.size(); ++k) io.out[k]->copy_from(out_[k]);
  for (size_t k = 0; k < params().size(); ++k)
    if (!param(k).learnable) param(k).value.copy_from(cpu_->param(k).value);  // running statistics
}

void HostFallbackLayer::backward(LayerIO& io, RunContext& ctx) {
  host_io_.out_grad.clear();
  host_io_.in_grad.clear();
  for (size_t k = 0; k < out_grad_.size(); ++k) {
    out_grad_[k].copy_from(*io.out_grad[k]);
    host_io_.out_grad.push_back(&out_grad_[k]);
  }
  for (size_t k = 0; k < in_grad_.size(); ++k) {
    if (io.in_grad[k]) in_grad_[k].copy_from(*io.in_grad[k]);
    host_io_.in_grad.push_back(io.in_grad[k] ? &in_grad_[k] : nullptr);
  }
  host_io_.skip_param_grad = io.skip_param_grad;
  RunContext host_ctx = ctx;
  host_ctx.device = Device{};
  cpu_->backward(host_io_, host_ctx);
  for (size_t k = 0; k < in_grad_.size(); ++k)
    if (io.in_grad[k]) io.in_grad[k]->copy_from(in_grad_[k]);
  for (size_t k = 0; k < params().size(); ++k)
    if (param(k).learnable && io.writes_param_grad(k)) param(k).grad.copy_from(cpu_->param(k).grad);
}

}  // namespace poseidon
