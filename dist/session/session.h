// Session: the distributed side of one training run, built in the only
// order that works and owned in one place.
//   1. the link model the hybrid planner needs (measured once, the same on
//      every rank: dist/plan/planner.h);
//   2. the plan (dist/plan/plan.h);
//   3. for a net on a GPU, what the GPU does for the exchange: SFB's
//      rebuild GEMM, and NCCL where every rank has a GPU of its own (its id
//      shared over MPI); then, from the plan, which layers go through a
//      host mirror (dist/plan/device_staging.h: those whose scheme computes
//      on the host, every one without NCCL or with dist.host_staging) and
//      which are exchanged on the GPU; none staged: no mirror;
//   4. the scheduler (dist/session/scheduler.h), the exchange's GradSink;
//   5. over it, the sink that marks the compute stream's gradients for
//      NCCL (dist/session/device_gradient_sink.h) and, for a mirror, the
//      staging sink (dist/gpu/host_staging_sink.h) in front of both.
// The trainer reports backward to sink() and asks the session for the
// collectives run between iterations; it makes no MPI call of its own.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/events.h"
#include "core/net.h"
#include "core/safetensors.h"
#include "core/solver.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/plan.h"
#include "dist/plan/plan_file.h"
#include "dist/plan/planner.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/stop_vote.h"
#include "dist/runtime/timeline.h"
#include "dist/schemes/exchange_compute.h"
#include "dist/session/scheduler.h"

namespace poseidon::dist {

class GpuGemm;
class HostStagingSink;
class NcclTransport;

struct SessionOptions {
  DistConfig config;
  int64_t first_iteration = 0;  // a resumed run's iteration
  bool check_finite = false;    // refuse non-finite gradients before they leave the rank
  // Emulated compute (dist/schemes/emulated_compute.h): the exchanges' arithmetic,
  // and the GEMM rate the planner assumes for SFB's rebuild. Null: real.
  std::shared_ptr<ExchangeCompute> compute;
  std::optional<double> gemm_gflops;
  // Hybrid: link figures an earlier start recorded (rank 0's are used for
  // every rank; none: probed), or a plan file pinning each layer's scheme.
  std::optional<LinkModel> recorded_link;
  std::optional<PlanRecord> pinned_plan;
  std::string pinned_plan_path;  // for its errors
  // Low-rank compression's state from a checkpoint, left in the file
  // (LowRankExchange::restore reads each rank's part).
  std::map<std::string, DeferredTensor> compression_state;
};

class Session {
 public:
  // `net` (built from `model`) holds the starting parameters, the same on
  // every rank (checked); `solver` holds the starting solver state.
  Session(Net& net, const ConfigNode& model, Solver& solver, const World& world, SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Where backward reports and forward's gates wait.
  GradSink& sink();
  // Returns once every iteration handed over so far is synchronised.
  void sync();
  // sync(), and the parameters the exchange made current copied into the net
  // (a net staged through a mirror gets them otherwise only at its gates).
  void bring_net_current();
  // Averages the buffers (running statistics) over the ranks, in the net too.
  void average_buffers();
  std::vector<double> sum_over_ranks(const std::vector<double>& values);
  // The full solver state, PS shards gathered; complete on rank 0 only.
  // Every rank must call it.
  Solver solver_snapshot();
  // Runs `save` on rank 0 with low-rank compression's state as streamed
  // checkpoint entries (Scheduler::save_with_compression_state). Every rank
  // must call it.
  void save_with_compression_state(const std::function<void(const std::vector<StreamedTensor>&)>& save);
  CommStats take_stats();
  // At every iteration boundary, on every rank: whether the job stops here
  // because some rank asked to (`mine`: this rank's wish). With MPI's
  // MPI_THREAD_MULTIPLE the wishes of one boundary decide at the next
  // (dist/runtime/stop_vote.h, nothing waits); without, they are summed at once on
  // the communication thread, which waits for the iteration's transfers.
  bool agree_to_stop(bool mine);
  void set_timeline(Timeline* timeline);

  const CommPlan& plan() const;
  // The link figures a hybrid plan was made for (none for the other schemes).
  const std::optional<LinkModel>& link() const { return link_; }
  // What was planned, to write down (dist/plan/plan_file.h).
  PlanRecord record() const;
  int rank() const;
  int size() const;
  // "4 ranks, hybrid (sfb 2 layers (fc6, fc7), ps 17 layers; per layer:
  // poseidon plan), WFBP; link ...": what the session runs, one terminal line
  // at the start of a training log.
  std::string describe() const;

 private:
  Net& net_;
  DistConfig config_;
  std::optional<LinkModel> link_;     // what the hybrid planner assumed
  std::unique_ptr<Net> mirror_;       // the host copy the exchange works on; null: net_ itself
  std::unique_ptr<GpuGemm> gpu_gemm_;
  std::unique_ptr<NcclTransport> nccl_;  // the all-reduce buckets' sums on the GPUs, or null
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<HostStagingSink> staging_;
  std::unique_ptr<GradSink> device_sink_;  // the gradients of the layers exchanged on the GPU
  std::string gpu_exchange_;               // how describe() says the GPU takes part
  std::unique_ptr<StopVote> stop_vote_;  // null without MPI_THREAD_MULTIPLE
};

}  // namespace poseidon::dist
