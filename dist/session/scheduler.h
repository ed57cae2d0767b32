// Scheduler: the GradSink of a distributed run, after Horovod's background
// thread. One communication thread makes every MPI call; the compute thread
// (Net::backward through grad_ready) only marks parameters ready. The
// communication thread starts the plan's sync groups strictly in plan order as they
// become ready (so collectives match on every rank), drives them with
// non-blocking MPI polled by MPI_Testsome, and opens each layer's gate when
// all of its parameters are synchronised; Net::forward of the next iteration
// waits on that gate (await_params), layer by layer.
//
// With WFBP (dist.wfbp: true) a group starts the moment backward has produced
// its gradients and overlaps the rest of backward and the next forward.
// Without it, backward_done() hands over everything and waits until all is
// synchronised: the baseline WFBP is measured against.
//
// Each group's exchange comes from the registry of schemes
// (dist/schemes/exchange_registry.h); what it moves goes through a transport
// (dist/runtime/host_transport.h, device_transport.h). With dist.order:
// priority the parameter server's sends go out lowest layer first through
// the shared transport's window; collectives (all-reduce buckets, SFB
// layers) start as soon as they are ready either way.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/events.h"
#include "core/net.h"
#include "core/safetensors.h"
#include "core/solver.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/plan.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/device_transport.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/host_transport.h"
#include "dist/runtime/stall.h"
#include "dist/runtime/timeline.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

// Communication of the iterations since the last take_stats().
struct CommStats {
  int64_t iterations = 0;
  int64_t bytes_sent = 0, bytes_received = 0;  // payload, per rank
  double comm_s = 0;                           // wall time with some transfer in flight
  double wait_s = 0;                           // time the compute thread waited for parameters
  // Share of the communication time the compute thread did not wait for.
  double hidden_share() const { return comm_s > 0 ? std::max(0.0, 1.0 - wait_s / comm_s) : 1.0; }
};

struct SchedulerOptions {
  DistConfig config;
  // The solver iteration of the first update (a resumed run's iteration).
  int64_t first_iteration = 0;
  // A gradient holding a NaN or an infinity is refused before it leaves this
  // rank (grad_ready throws), so it reaches no replica.
  bool check_finite = false;
  // For a net staged from a GPU (dist/gpu/host_staging_sink.h), what that GPU
  // does for the exchanges; empty or null: the host. SFB's rebuild GEMMs
  // (dist/gpu/gpu_gemm.h), and the all-reduce buckets' sums
  // (dist/runtime/nccl_transport.h: not owned; it outlives the scheduler).
  // For a net exchanged on its GPU (no mirror: dist/plan/device_staging.h)
  // `device_sums` averages every bucket there.
  RebuildGemm rebuild_gemm;
  DeviceTransport* device_sums = nullptr;
  // The exchanges' arithmetic; null: on this host (HostCompute, with
  // `rebuild_gemm`). Emulated compute passes its own (dist/schemes/emulated_compute.h).
  std::shared_ptr<ExchangeCompute> compute;
  // A checkpoint's entries beyond the net and the solver (low-rank
  // compression's state), which each exchange restores its own from (Exchange::restore).
  std::map<std::string, DeferredTensor> compression_state;
};

class Scheduler : public GradSink {
 public:
  // Runs `plan` for `net` on the ranks of `world`. The solver's state for PS
  // parameters moves into their owners' shards. Replicas must start
  // identical (checked).
  Scheduler(Net& net, Solver& solver, const World& world, CommPlan plan, SchedulerOptions options);
  ~Scheduler() override;

  // SFB weights: formed from their layer's input and output gradient.
  const std::vector<BlobPart>& gradient_sources(const Param& param) const override;
  void await_params(const Layer& layer) override;
  void grad_ready(Param& param) override;
  void backward_done() override;

  // Returns once every iteration handed over so far is synchronised.
  void sync();
  // Throws what stopped the communication thread, if anything did.
  void check();
  // Runs `task` on the communication thread after sync(), for collectives
  // outside the iteration (metrics, checkpoints). Rethrows what it throws.
  void run(const std::function<void(const Comm&)>& task);

  // Sums `values` over all ranks; every rank gets the same result.
  std::vector<double> sum_over_ranks(const std::vector<double>& values);
  // A copy of the solver holding the full optimizer state, PS shards
  // gathered; complete on rank `root` only. Every rank must call it.
  Solver solver_snapshot(int root = 0);
  // Runs `save` on rank `root` with the exchanges' own state
  // (Exchange::state_entries; low-rank compression's Q and every rank's error
  // memory: dist/schemes/lowrank.h) as streamed checkpoint entries: each
  // collective entry, when its turn comes, receives the ranks' parts one at
  // a time, which the other ranks send meanwhile. Every rank must call it;
  // `save` must produce the entries in order (write_safetensors does).
  void save_with_compression_state(const std::function<void(const std::vector<StreamedTensor>&)>& save,
                                   int root = 0);
  // Averages the Net's buffers (e.g. batch-norm running statistics, which
  // each rank gathers from its own shard) over the ranks, identically on all.
  void average_buffers();

  CommStats take_stats();
  // Records each sync group's transfers on a lane of its own of `timeline`,
  // and the solver updates on its update lane (set before training; null: none).
  void set_timeline(Timeline* timeline);
  const CommPlan& plan() const { return plan_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }

 private:
  void loop();
  void stop_thread();
  void start_group(size_t u);
  void finish_group(size_t u);
  bool groups_done_locked() const;  // every group has finished every handed-over iteration
  void rethrow_locked() const;
  void check_replicas_identical();
  // Throws naming the first NaN or infinity of the parameter's gradient.
  void check_gradient_finite(const Param& param) const;

  Net& net_;
  Solver& solver_;
  CommPlan plan_;
  DistConfig config_;
  std::unique_ptr<Comm> comm_;
  int64_t first_iteration_;
  bool check_finite_;
  std::shared_ptr<TracingCompute> compute_;  // the options' compute, traced when a timeline is set
  std::unordered_map<const Layer*, size_t> layer_index_;
  std::unordered_map<const Param*, size_t> group_of_param_;
  std::unordered_map<const Param*, const std::vector<BlobPart>*> formed_;  // gradients an exchange forms itself
  std::unique_ptr<HostTransport> shared_transport_;  // over comm_, with dist.order's queue
  std::vector<std::unique_ptr<Exchange>> exchanges_;  // per group
  std::unordered_map<const Exchange*, size_t> group_of_exchange_;

  // Shared between the threads, under mutex_.
  std::mutex mutex_;
  std::condition_variable gates_;     // the compute thread waits here
  std::condition_variable work_;      // the communication thread waits here
  std::vector<int> ready_params_;     // per group: parameters reported this iteration
  std::vector<bool> ready_;           // per group: handed over, not started
  std::vector<int64_t> done_rounds_;  // per group: iterations finished
  int64_t handed_rounds_ = 0;         // iterations handed over (backward_done calls)
  std::function<void()> task_;
  bool stop_ = false;
  std::exception_ptr error_;
  CommStats stats_;     // totals since the start
  CommStats reported_;  // totals at the last take_stats()

  std::atomic<Timeline*> timeline_ = nullptr;

  // The communication thread's own.
  InFlight in_flight_;
  std::vector<Timeline::Clock::time_point> group_started_;
  std::unique_ptr<StallInspector> inspector_;
  size_t next_group_ = 0;
  int64_t started_rounds_ = 0;
  std::thread thread_;
};

}  // namespace poseidon::dist
