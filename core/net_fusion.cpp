// ReLU fusion (Net::fuse_relus): a ReLU whose input only it reads is applied
// by that input's producer, so that the ReLU's own passes over the
// activation, forward and backward, disappear. The graph keeps every layer
// and blob name; the ReLU's output blob shares its input's tensors.
#include "core/net.h"
#include "core/relu_fusion.h"

namespace poseidon {

int Net::fuse_relus(const std::set<std::string>& keep) {
  std::vector<int> readers(blobs_.size(), 0);
  for (const auto& in : layer_in_)
    for (size_t b : in) ++readers[b];
  fused_.resize(layers_.size(), false);
  int count = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (fused_[i] || layers_[i]->type() != "relu") continue;
    const size_t in = layer_in_[i][0];
    const int producer = blobs_[in].producer;
    if (producer < 0 || readers[in] != 1 || keep.count(blobs_[in].name) || layer_out_[producer].size() != 1) continue;
    // The shared tensor holds one type: not where the ReLU reads a float32
    // copy of its bfloat16 input (core/blob_types.h).
    if (blob_types_[in] != blob_types_[layer_out_[i][0]]) continue;
    auto* fusable = dynamic_cast<ReluFusable*>(layers_[producer].get());
    if (!fusable || fusable->relu_fused() || !fusable->fuse_relu()) continue;
    fused_[i] = true;
    blobs_[layer_out_[i][0]].shares = static_cast<int>(in);
    ++count;
  }
  if (count > 0 && allocated_) share_fused_blobs();
  if (count > 0) plan_input_grad_writes();
  return count;
}

// The gradient is shared as well as the value: the ReLU's readers add their
// gradients into it, and the producer reads it masked by its output.
void Net::share_fused_blobs() {
  for (Blob& b : blobs_) {
    if (b.shares < 0) continue;
    b.value = blobs_[b.shares].value;
    b.grad = blobs_[b.shares].grad;
  }
}

}  // namespace poseidon
