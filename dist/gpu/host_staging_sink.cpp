// The host staging of a GPU net's distribution (see host_staging_sink.h).
#include "dist/gpu/host_staging_sink.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace poseidon::dist {

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
  values_written(dst);
}
}  // namespace

void copy_net_state(Net& from, Net& to) {
  copy_params(from, to, [](const Param&) { return true; });
}

void copy_net_buffers(Net& from, Net& to) {
  copy_params(from, to, [](const Param& p) { return !p.learnable; });
}

HostStagingSink::HostStagingSink(Net& net, Net& mirror, GradSink& inner, std::vector<bool> staged,
                                 GradSink* device_inner)
    : net_(net), mirror_(mirror), inner_(inner), staged_(std::move(staged)), device_inner_(device_inner) {
  check_same_model(net_, mirror_);
  POSEIDON_CHECK(staged_.empty() || staged_.size() == net_.num_layers())
      << staged_.size() << " staging choices for " << net_.num_layers() << " layers";
  for (size_t i = 0; i < net_.num_layers(); ++i) {
    POSEIDON_CHECK(net_.layer(i).name() == mirror_.layer(i).name()) << "host mirror's layers are in another order";
    POSEIDON_CHECK(staged_layer(i) || device_inner_)
        << "layer '" << net_.layer(i).name() << "' is exchanged on the device, but no sink takes its gradients";
    layer_index_[&net_.layer(i)] = i;
    auto& mine = net_.layer(i).params();
    auto& theirs = mirror_.layer(i).params();
    for (size_t k = 0; k < mine.size(); ++k) {
      mirror_param_[&mine[k]] = &theirs[k];
      param_layer_[&mine[k]] = i;
    }
  }
  if (!net_.device().is_cuda()) return;
  streams_ = std::make_unique<StagingStreams>(net_.device());
  pin_mirror();
  stager_ = std::thread(&HostStagingSink::hand_over, this);
}

HostStagingSink::~HostStagingSink() {
  if (!stager_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  queued_.notify_all();
  stager_.join();
}

namespace {

// The first element of a host or GPU tensor of either element type, for
// copies that move its bytes as they are.
void* elements(Tensor& t) {
  return t.dtype() == DType::bf16 ? static_cast<void*>(t.bf16_data()) : static_cast<void*>(t.data());
}

StagingStreams::Copy tensor_copy(Tensor& to, Tensor& from) {
  if (to.dtype() != from.dtype() || to.numel() != from.numel())
    throw Error("host staging: a blob of the mirror and of the GPU net differ in element type or size");
  return {elements(to), elements(from), from.bytes()};
}

void run_on_host(const std::vector<StagingStreams::Copy>& copies) {
  for (const auto& c : copies) std::memcpy(c.dst, c.src, c.bytes);
}

}  // namespace

void HostStagingSink::pin_mirror() {
  auto pin = [&](Tensor& t) { streams_->pin(elements(t), t.bytes()); };
  // Whole: parameters are views into these. Neighbours share pages, which
  // are pinned once.
  pin(mirror_.flat_values());
  pin(mirror_.flat_grads());
  for (Param* p : mirror_.params())
    for (const BlobPart& part : inner_.gradient_sources(*p)) {
      Blob& blob = mirror_.blob(part.blob);
      pin(part.gradient ? blob.grad : blob.value);
    }
}

const Layer& HostStagingSink::mirror_layer(const Layer& layer) const { return mirror_.layer(layer_index_.at(&layer)); }

void HostStagingSink::rethrow() {
  std::lock_guard lock(mutex_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void HostStagingSink::await_params(const Layer& layer) {
  rethrow();
  const size_t i = layer_index_.at(&layer);
  inner_.await_params(mirror_.layer(i));
  if (!staged_layer(i)) return;  // its exchange updated the net's own parameters
  auto& mine = net_.layer(i).params();
  auto& theirs = mirror_.layer(i).params();
  std::vector<StagingStreams::Copy> up;
  for (size_t k = 0; k < mine.size(); ++k)
    if (mine[k].learnable) up.push_back(tensor_copy(mine[k].value, theirs[k].value));
  if (streams_) {
    streams_->upload(up);  // the layer's kernels, queued next, wait for it on the GPU
    return;
  }
  run_on_host(up);
}

std::vector<StagingStreams::Copy> HostStagingSink::gradient_copies(Param& param) const {
  Param& mirror = *mirror_param_.at(&param);
  const std::vector<BlobPart>& sources = inner_.gradient_sources(mirror);
  if (sources.empty()) return {tensor_copy(mirror.grad, param.grad)};
  // The exchange forms this gradient itself: the mirror's blobs must hold
  // this iteration's parts it is formed from.
  std::vector<StagingStreams::Copy> copies;
  for (const BlobPart& part : sources) {
    Tensor& from = part.gradient ? net_.blob(part.blob).grad : net_.blob(part.blob).value;
    Tensor& to = part.gradient ? mirror_.blob(part.blob).grad : mirror_.blob(part.blob).value;
    copies.push_back(tensor_copy(to, from));
  }
  return copies;
}

void HostStagingSink::grad_ready(Param& param) {
  rethrow();
  if (!staged_param(param)) return device_inner_->grad_ready(param);
  Param& mirror = *mirror_param_.at(&param);
  const std::vector<StagingStreams::Copy> down = gradient_copies(param);
  if (!streams_) {
    run_on_host(down);
    inner_.grad_ready(mirror);
    return;
  }
  const StagingStreams::Ticket ticket = streams_->download(down);
  std::lock_guard lock(mutex_);
  landings_.push_back(Landing{&mirror, ticket, std::chrono::steady_clock::now()});
  queued_.notify_one();
}

void HostStagingSink::bring_staged_current() {
  for (size_t i = 0; i < net_.num_layers(); ++i) {
    if (!staged_layer(i)) continue;
    auto& mine = net_.layer(i).params();
    auto& theirs = mirror_.layer(i).params();
    for (size_t k = 0; k < mine.size(); ++k) {
      mine[k].value.copy_from(theirs[k].value);
      mine[k].rounded.current = false;
    }
  }
}

void HostStagingSink::backward_done() {
  if (streams_) {
    // Every gradient handed over before the exchange hears that backward is
    // done; the next forward's gates then ask about this iteration.
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [&] { return landings_.empty() && !handing_; });
  }
  rethrow();
  inner_.backward_done();
}

void HostStagingSink::hand_over() {
  for (;;) {
    std::unique_lock lock(mutex_);
    queued_.wait(lock, [&] { return stop_ || !landings_.empty(); });
    if (landings_.empty()) return;  // stopping
    const Landing landing = landings_.front();
    landings_.pop_front();
    handing_ = true;
    const bool failed = error_ != nullptr;
    lock.unlock();
    try {
      streams_->wait(landing.ticket);
      if (observer_) observer_(*landing.mirror, landing.queued, std::chrono::steady_clock::now());
      if (!failed) inner_.grad_ready(*landing.mirror);
    } catch (...) {
      lock.lock();
      if (!error_) error_ = std::current_exception();
      lock.unlock();
    }
    lock.lock();
    handing_ = false;
    drained_.notify_all();
  }
}

}  // namespace poseidon::dist
