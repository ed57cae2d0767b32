// Net execution: forward in topological order, backward in reverse with a
// gradient-ready report per learnable parameter as soon as it is complete;
// with emulated compute, waits of profiled length in place of the layers.
#include "core/net.h"

#include <chrono>
#include <thread>

#include "core/error.h"

namespace poseidon {

// Sleeps end late, by more on a loaded machine, and a model of hundreds of
// small layers would add that up: what one wait overran is taken off the
// next, so the waits of an iteration sum to the profile's time.
void Net::emulated_wait(double seconds) {
  const double wait = seconds - emulation_overrun_s_;
  if (wait <= 0) {
    emulation_overrun_s_ = -wait;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  emulation_overrun_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - wait;
}

void Net::emulate_compute(std::vector<double> forward_s, std::vector<double> backward_s) {
  POSEIDON_CHECK((forward_s.empty() && backward_s.empty()) ||
                 (forward_s.size() == layers_.size() && backward_s.size() == layers_.size()))
      << "emulated compute needs one forward and one backward time per layer";
  emulated_forward_s_ = std::move(forward_s);
  emulated_backward_s_ = std::move(backward_s);
  emulation_overrun_s_ = 0;
}

void Net::forward_layer(size_t i, RunContext& ctx) {
  if (!emulated_forward_s_.empty())
    emulated_wait(emulated_forward_s_[i]);
  else
    layers_[i]->forward(io_[i], ctx);
}

void Net::backward_layer(size_t i, RunContext& ctx) {
  if (!runs_backward_[i]) return;
  if (!emulated_backward_s_.empty())
    emulated_wait(emulated_backward_s_[i]);
  else
    layers_[i]->backward(io_[i], ctx);
}

float Net::forward(RunContext& ctx, GradSink* gate) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (gate) {
      gate->await_params(*layers_[i]);
      gate->layer_begin(*layers_[i], false);
    }
    forward_layer(i, ctx);
    if (gate) gate->layer_end(*layers_[i], false);
  }
  float loss = 0.f;
  for (size_t i = 0; i < layers_.size(); ++i) {
    float w = layers_[i]->loss_weight();
    if (w == 0.f) continue;
    for (size_t b : layer_out_[i]) loss += w * blobs_[b].value.item(0);
  }
  for (auto& l : layers_) l->after_forward();
  return loss;
}

void Net::zero_blob_grads() {
  for (auto& b : blobs_)
    if (b.grad.defined()) b.grad.zero();
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
