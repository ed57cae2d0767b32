// Net execution: forward in topological order, backward in reverse with a
// gradient-ready report per learnable parameter as soon as it is complete.
#include "core/device_memory.h"
#include "core/error.h"
#include "core/net.h"

namespace poseidon {

// A fused ReLU's work is done by its input's producer (Net::fuse_relus).
// A runner, where one is set, stands in for the layers' own code.
void Net::forward_layer(size_t i, RunContext& ctx) {
  if (!fused(i)) {
    if (runner_)
      runner_->forward(i, *layers_[i], io_[i], ctx);
    else
      layers_[i]->forward(io_[i], ctx);
  }
  widen_outputs(i);
}

void Net::backward_layer(size_t i, RunContext& ctx) {
  if (runs_backward_[i] && !fused(i)) {
    if (runner_)
      runner_->backward(i, *layers_[i], io_[i], ctx);
    else
      layers_[i]->backward(io_[i], ctx);
  }
  round_copied_grads(i);
}

// After a fused ReLU's turn too: its output is its producer's tensor, which
// holds the ReLU'd values by then.
void Net::widen_outputs(size_t i) {
  for (size_t b : layer_out_[i])
    if (blobs_[b].f32_value.defined()) blobs_[b].f32_value.copy_from(blobs_[b].value);
}

void Net::round_copied_grads(size_t i) {
  for (size_t b : rounds_after_[i]) {
    Blob& blob = blobs_[b];
    device_memory::add_rounded_into_bf16(blob.grad.device(), blob.grad.bf16_data(), blob.f32_grad.data(),
                                         static_cast<size_t>(blob.grad.numel()));
  }
}

void Net::run_forward(RunContext& ctx, GradSink* gate) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (gate) {
      gate->await_params(*layers_[i]);
      gate->layer_begin(*layers_[i], false);
    }
    forward_layer(i, ctx);
    if (gate) gate->layer_end(*layers_[i], false);
  }
}

std::vector<Net::LossTerm> Net::loss_terms() const {
  std::vector<LossTerm> terms;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const float w = layers_[i]->loss_weight();
    if (w == 0.f) continue;
    for (size_t b : layer_out_[i]) terms.push_back({w, &blobs_[b].value});
  }
  return terms;
}

float Net::loss() const {
  float loss = 0.f;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const float w = layers_[i]->loss_weight();
    if (w == 0.f) continue;
    for (size_t b : layer_out_[i]) loss += w * blobs_[b].value.item(0);
  }
  return loss;
}

void Net::check_forward() {
  for (auto& l : layers_) l->after_forward();
}

float Net::forward(RunContext& ctx, GradSink* gate) {
  run_forward(ctx, gate);
  const float result = loss();
  check_forward();
  return result;
}

void Net::zero_blob_grads() {
  for (size_t i = 0; i < blobs_.size(); ++i) {
    Blob& b = blobs_[i];
    if (b.grad.defined() && b.shares < 0 && !grad_overwritten_[i]) b.grad.zero();
    if (b.f32_grad.defined()) b.f32_grad.zero();
  }
}

// Which input gradients their first writer may overwrite. Backward runs the
// layers in reverse order, so the first to reach a gradient tensor is the
// last layer to read a blob holding it (a fused ReLU's output shares its
// input's). A loss output is seeded, not zeroed, and a layer that reads the
// same tensor through two inputs adds both: neither is overwritten. Nor is
// a bfloat16 blob read through a float32 copy: its readers and the copy's
// rounding add into zeroed gradients.
void Net::plan_input_grad_writes() {
  grad_overwritten_.assign(blobs_.size(), false);
  std::vector<bool> reached(blobs_.size(), false);
  auto tensor_of = [&](size_t b) { return blobs_[b].shares < 0 ? b : static_cast<size_t>(blobs_[b].shares); };
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t k = 0; k < layer_in_[i].size(); ++k)
      if (reads_copy_[i][k]) reached[tensor_of(layer_in_[i][k])] = true;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->loss_weight() != 0.f)
      for (size_t b : layer_out_[i]) reached[tensor_of(b)] = true;
  for (size_t i = layers_.size(); i-- > 0;) {
    LayerIO& io = io_[i];
    io.in_grad_unset.clear();
    if (!runs_backward_[i] || fused(i)) continue;
    const bool writes = layers_[i]->writes_input_grads();
    if (writes) io.in_grad_unset.assign(layer_in_[i].size(), false);
    for (size_t k = 0; k < layer_in_[i].size(); ++k) {
      const size_t t = tensor_of(layer_in_[i][k]);
      if (!io.in_grad[k] || reached[t]) continue;
      reached[t] = true;
      bool once = writes;
      for (size_t j = 0; j < layer_in_[i].size(); ++j)
        if (j != k && io.in_grad[j] && tensor_of(layer_in_[i][j]) == t) once = false;
      if (!once) continue;
      io.in_grad_unset[k] = true;
      grad_overwritten_[t] = true;
    }
  }
}

void Net::seed_loss_grads() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    float w = layers_[i]->loss_weight();
    if (w == 0.f || !runs_backward_[i]) continue;
    for (size_t b : layer_out_[i]) blobs_[b].grad.fill(w);
  }
}

void Net::backward(RunContext& ctx, GradSink& sink) {
  zero_blob_grads();
  seed_loss_grads();
  for (size_t i = layers_.size(); i-- > 0;) {
    Layer& l = *layers_[i];
    if (runs_backward_[i]) {
      auto& skip = io_[i].skip_param_grad;
      skip.resize(l.params().size());
      for (size_t k = 0; k < skip.size(); ++k) skip[k] = !sink.gradient_sources(l.params()[k]).empty();
      sink.layer_begin(l, true);
      backward_layer(i, ctx);
      sink.layer_end(l, true);
    } else {
      for (auto& p : l.params())
        if (p.learnable) p.grad.zero();
    }
    for (auto& p : l.params())
      if (p.learnable) sink.grad_ready(p);
  }
  sink.backward_done();
}

}  // namespace poseidon
