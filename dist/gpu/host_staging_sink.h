// Distribution for a net whose tensors live on a GPU, through a host copy.
// The exchange (dist's scheduler: parameter server, SFB, all-reduce over MPI)
// works on host memory; this sink sits between the GPU net and a GradSink
// that serves a second Net of the same model on the host (the mirror):
// each finished gradient is copied down before it is handed over (with, for
// a gradient that the exchange forms itself, the blobs it forms it from:
// GradSink::gradient_sources), and each layer's gate copies the
// parameters the exchange made current back up before the layer runs.
//
// On a GPU neither direction holds the compute stream or the thread that
// queues its kernels: a gradient's copy is queued on the copy stream behind
// an event of the compute stream into pinned memory, and a staging thread
// hands it to the exchange once it has landed; the parameters go up on the
// other copy stream and the layer's kernels wait for them on the GPU. The
// thread that runs the net waits only for the exchange itself (at a gate)
// and, at the end of backward, for the last gradients to be handed over.
// With both nets on the CPU it runs the same path with plain copies, which is
// how the tests check it against distribution without staging.
//
// Only the layers `staged` names go through the mirror (dist/plan/
// device_staging.h: those whose scheme computes on the host). The others
// are exchanged on the device: their gradients go, without a copy, from the
// net's own parameters to `device_inner`, and their parameters are not
// uploaded at the gate (the exchange updated them in place); their gates
// are still the mirror layer's, which the scheduler knows.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/events.h"
#include "core/net.h"
#include "dist/gpu/staging_streams.h"

namespace poseidon::dist {

class HostStagingSink : public GradSink {
 public:
  // `net` and `mirror` are built from the same model; `inner` serves `mirror`.
  // `staged`: per layer, whether it goes through the mirror (empty: every
  // layer); `device_inner` takes the gradients of the others (null only
  // where every layer is staged).
  HostStagingSink(Net& net, Net& mirror, GradSink& inner, std::vector<bool> staged = {},
                  GradSink* device_inner = nullptr);
  ~HostStagingSink() override;

  // What `inner` forms itself is formed from the same blobs of the net.
  const std::vector<BlobPart>& gradient_sources(const Param& param) const override {
    if (!staged_param(param)) return device_inner_->gradient_sources(param);
    return inner_.gradient_sources(*mirror_param_.at(&param));
  }
  void await_params(const Layer& layer) override;
  void grad_ready(Param& param) override;
  void backward_done() override;
  void layer_begin(const Layer& layer, bool backward) override { inner_.layer_begin(mirror_layer(layer), backward); }
  void layer_end(const Layer& layer, bool backward) override { inner_.layer_end(mirror_layer(layer), backward); }

  // Told, on the staging thread, of each gradient copy that has landed: the
  // mirror's parameter, when the copy was queued and when it was seen landed
  // (for timelines; a GPU net only).
  using LandingObserver = std::function<void(const Param& mirror, std::chrono::steady_clock::time_point queued,
                                             std::chrono::steady_clock::time_point landed)>;
  void observe_landings(LandingObserver observer) { observer_ = std::move(observer); }

  // Copies the parameters and buffers (values) of the staged layers from the
  // mirror, where their exchange made them current, into the net; the
  // others are current in the net already.
  void bring_staged_current();

 private:
  const Layer& mirror_layer(const Layer& layer) const;
  bool staged_layer(size_t i) const { return staged_.empty() || staged_[i]; }
  bool staged_param(const Param& param) const { return staged_layer(param_layer_.at(&param)); }
  // The copies that bring `param`'s gradient (or what SFB forms it from) down.
  std::vector<StagingStreams::Copy> gradient_copies(Param& param) const;
  void pin_mirror();
  void hand_over();  // the staging thread
  void rethrow();

  Net& net_;
  Net& mirror_;
  GradSink& inner_;
  // On a GPU: the streams and the staging thread's queue of downloads, each
  // a mirror parameter (null: backward is done) and its ticket.
  std::unique_ptr<StagingStreams> streams_;
  struct Landing {
    Param* mirror;
    StagingStreams::Ticket ticket;
    std::chrono::steady_clock::time_point queued;
  };
  LandingObserver observer_;
  std::mutex mutex_;
  std::condition_variable queued_, drained_;
  std::deque<Landing> landings_;
  bool handing_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread stager_;
  std::unordered_map<const Layer*, size_t> layer_index_;
  std::unordered_map<const Param*, Param*> mirror_param_;
  std::unordered_map<const Param*, size_t> param_layer_;  // the net's parameters' layers
  std::vector<bool> staged_;
  GradSink* device_inner_;
};

// Copies every parameter and buffer (values only) of `from` into `to`, a net
// of the same model on any device.
void copy_net_state(Net& from, Net& to);
// Copies only the buffers (running statistics).
void copy_net_buffers(Net& from, Net& to);

}  // namespace poseidon::dist
