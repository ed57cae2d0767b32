// Accuracy on the GPU: a metric over a few logits per sample, so the inputs
// are copied to the host and scored by the CPU layer itself (same ranking,
// ties and label checks); only the scalar goes back to the GPU.
#include "core/registry.h"
#include "layers/accuracy.h"

namespace poseidon {

namespace {

class AccuracyCudaLayer : public AccuracyLayer {
 public:
  using AccuracyLayer::AccuracyLayer;

  void forward(LayerIO& io, RunContext& ctx) override {
    host_logits_.resize(io.in[0]->shape());
    host_logits_.copy_from(*io.in[0]);
    host_labels_.resize(io.in[1]->shape());
    host_labels_.copy_from(*io.in[1]);
    host_accuracy_.resize(io.out[0]->shape());
    LayerIO host_io;
    host_io.in = {&host_logits_, &host_labels_};
    host_io.out = {&host_accuracy_};
    RunContext host_ctx = ctx;
    host_ctx.device = Device{};
    AccuracyLayer::forward(host_io, host_ctx);
    io.out[0]->copy_from(host_accuracy_);
  }

 private:
  // Host copies, kept so that their storage is reused every iteration.
  Tensor host_logits_, host_labels_, host_accuracy_;
};

}  // namespace

POSEIDON_REGISTER_CUDA_LAYER(AccuracyCudaLayer, "accuracy");

}  // namespace poseidon
