// The host staging of a GPU net's distribution (see host_staging_sink.h).
#include "core/host_staging_sink.h"

#include "core/error.h"

namespace poseidon {

namespace {
void check_same_model(Net& a, Net& b) {
  POSEIDON_CHECK(a.num_layers() == b.num_layers() && a.params().size() == b.params().size())
      << "host mirror of '" << a.name() << "' differs from the net";
}

template <class Pick>
void copy_params(Net& from, Net& to, Pick pick) {
  check_same_model(from, to);
  auto src = from.params();
  auto dst = to.params();
  for (size_t i = 0; i < src.size(); ++i)
    if (pick(*src[i])) dst[i]->value.copy_from(src[i]->value);
}
}  // namespace

void copy_net_state(Net& from, Net& to) {
  copy_params(from, to, [](const Param&) { return true; });
}

void copy_net_buffers(Net& from, Net& to) {
  copy_params(from, to, [](const Param& p) { return !p.learnable; });
}

HostStagingSink::HostStagingSink(Net& net, Net& mirror, GradSink& inner) : net_(net), mirror_(mirror), inner_(inner) {
  check_same_model(net_, mirror_);
  for (size_t i = 0; i < net_.num_layers(); ++i) {
    POSEIDON_CHECK(net_.layer(i).name() == mirror_.layer(i).name()) << "host mirror's layers are in another order";
    layer_index_[&net_.layer(i)] = i;
    auto& mine = net_.layer(i).params();
    auto& theirs = mirror_.layer(i).params();
    for (size_t k = 0; k < mine.size(); ++k) {
      // The exchange decides (SFB forms these gradients itself), so the
      // net's backward may skip them as it would alone.
      mine[k].grad_formed_elsewhere = theirs[k].grad_formed_elsewhere;
      mirror_param_[&mine[k]] = &theirs[k];
      param_layer_[&mine[k]] = i;
    }
  }
}

const Layer& HostStagingSink::mirror_layer(const Layer& layer) const { return mirror_.layer(layer_index_.at(&layer)); }

void HostStagingSink::await_params(const Layer& layer) {
  const size_t i = layer_index_.at(&layer);
  inner_.await_params(mirror_.layer(i));
  // Queued ahead of the layer's kernels on the device's stream.
  auto& mine = net_.layer(i).params();
  auto& theirs = mirror_.layer(i).params();
  for (size_t k = 0; k < mine.size(); ++k)
    if (mine[k].learnable) mine[k].value.copy_from(theirs[k].value);
}

void HostStagingSink::grad_ready(Param& param) {
  Param& mirror = *mirror_param_.at(&param);
  if (mirror.grad_formed_elsewhere) {
    // SFB forms this gradient from the layer's input and output gradient;
    // the mirror's blobs must hold this iteration's.
    const Layer& layer = net_.layer(param_layer_.at(&param));
    mirror_.blob(layer.inputs()[0]).value.copy_from(net_.blob(layer.inputs()[0]).value);
    mirror_.blob(layer.outputs()[0]).grad.copy_from(net_.blob(layer.outputs()[0]).grad);
  } else {
    mirror.grad.copy_from(param.grad);
  }
  inner_.grad_ready(mirror);
}

}  // namespace poseidon
