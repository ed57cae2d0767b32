// DeviceGradientSink: where backward reports a net exchanged on its GPU (no
// host mirror: dist/plan/device_staging.h). Before each gradient goes to
// the scheduler it tells the device transport that the compute stream's
// work queued so far produced it (DeviceTransport::gradients_queued), so
// the bucket's NCCL mean waits for that point on the GPU; nothing waits on
// the host. Everything else is the scheduler's.
#pragma once

#include <vector>

#include "core/events.h"
#include "dist/runtime/device_transport.h"

namespace poseidon::dist {

class DeviceGradientSink : public GradSink {
 public:
  DeviceGradientSink(GradSink& scheduler, DeviceTransport& transport) : scheduler_(scheduler), transport_(transport) {}

  const std::vector<BlobPart>& gradient_sources(const Param& param) const override {
    return scheduler_.gradient_sources(param);
  }
  void await_params(const Layer& layer) override { scheduler_.await_params(layer); }
  void grad_ready(Param& param) override {
    transport_.gradients_queued();
    scheduler_.grad_ready(param);
  }
  void backward_done() override { scheduler_.backward_done(); }
  void layer_begin(const Layer& layer, bool backward) override { scheduler_.layer_begin(layer, backward); }
  void layer_end(const Layer& layer, bool backward) override { scheduler_.layer_end(layer, backward); }

 private:
  GradSink& scheduler_;
  DeviceTransport& transport_;
};

}  // namespace poseidon::dist
