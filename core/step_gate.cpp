// The finite guard of a training step, on the host or on a GPU.
#include "core/step_gate.h"

#include <cmath>

#include "core/error.h"
#include "core/finite_check.h"

namespace poseidon {

StepGate::StepGate(Net& net, Solver& solver)
    : net_(net), solver_(solver), terms_(net.loss_terms()), on_gpu_(net.device().is_cuda()) {
  if (!on_gpu_) return;
  POSEIDON_CHECK(terms_.size() <= size_t(GateScan::kMaxTerms))
      << "the finite guard reads at most " << GateScan::kMaxTerms << " loss outputs; the net has " << terms_.size();
  const size_t count = terms_.size() + 1;
  gate_ = Tensor({int64_t(count)}, net.device());
  readback_ = std::make_unique<device_memory::Readback>(net.device(), 2, count);
}

StepGate::~StepGate() = default;

void StepGate::close(int slot, LocalGradSink& held) {
  if (!on_gpu_) {
    Reading& r = readings_[slot];
    r.loss = net_.loss();
    if (!std::isfinite(r.loss)) {
      r.what = describe_non_finite_loss(r.loss, net_);
    } else if (const std::optional<NonFinite> bad = find_non_finite_gradient(net_)) {
      r.what = bad->describe("non-finite gradient");
    } else {
      r.what.clear();
    }
    r.finite = r.what.empty();
    rejected_ = rejected_ || !r.finite;
    if (rejected_)
      held.discard_held();
    else
      held.apply_held();
    return;
  }
  close_on_device(held);
  closed(slot);
}

void StepGate::close_on_device(LocalGradSink& held) {
  POSEIDON_CHECK(on_gpu_) << "a host step closes at once";
  GateScan scan;
  for (const Net::LossTerm& t : terms_) scan.terms[scan.count++] = t.value->data();
  scan.grads = net_.flat_grads().data();
  scan.n = net_.flat_grads().numel();
  device_memory::gpu_gate_scan(net_.device(), scan, gate_.data());
  updated_ = held.held();  // reuses its capacity
  held.apply_held(gate_.data() + scan.count);
}

void StepGate::closed(int slot) {
  readback_->fetch(slot, gate_.data());
  closed_as_[slot] = closed_++;
}

StepGate::Reading StepGate::read(int slot) {
  if (!on_gpu_) return readings_[slot];
  const float* values = readback_->read(slot);
  Reading r;
  // As Net::loss adds them.
  for (size_t j = 0; j < terms_.size(); ++j) r.loss += terms_[j].weight * values[j];
  r.finite = values[terms_.size()] == 0.f;
  if (!r.finite) solver_.uncount_steps(updated_, closed_ - closed_as_[slot]);
  return r;
}

}  // namespace poseidon
