// The distributed stack of a training run, built in order (see session.h).
#include "dist/session/session.h"

#include <algorithm>
#include <map>

#include "core/units.h"
#include "dist/gpu/gpu_gemm.h"
#include "dist/gpu/host_staging_sink.h"
#include "dist/plan/device_staging.h"
#include "dist/runtime/link_probe.h"
#include "dist/runtime/nccl_transport.h"
#include "dist/session/device_gradient_sink.h"

namespace poseidon::dist {

Session::Session(Net& net, const ConfigNode& model, Solver& solver, const World& world, SessionOptions options)
    : net_(net), config_(options.config) {
  POSEIDON_CHECK(world.size() > 1) << "a distributed session needs several ranks";
  // Made before the communication thread exists, which then never shares a call with it.
  if (world.thread_level() >= MPI_THREAD_MULTIPLE) stop_vote_ = std::make_unique<StopVote>(world);
  // The plan reads the model's layers and shapes, the same in the net and a
  // host mirror of it.
  std::map<size_t, Scheme> pinned;
  std::map<size_t, Wire> wires;
  std::map<size_t, int> ranks;
  if (options.pinned_plan) {
    pinned = pinned_schemes(*options.pinned_plan, net_, options.pinned_plan_path);
    wires = pinned_wires(*options.pinned_plan, net_);
    ranks = pinned_ranks(*options.pinned_plan, net_, options.pinned_plan_path);
    for (const auto& [layer, scheme] : pinned)
      if (scheme == Scheme::lowrank && !ranks.count(layer) && !lowrank_applicable(net_, layer, config_.lowrank_rank))
        throw Error(options.pinned_plan_path + ": layer '" + net_.layer(layer).name() +
                    "' cannot be compressed to rank " + std::to_string(config_.lowrank_rank) +
                    " (lowrank needs a weight of two or more dimensions, both sides above dist.lowrank_rank)");
    link_ = options.pinned_plan->link;
    if (options.pinned_plan->tuned) apply_tuned(*options.pinned_plan->tuned, config_);
  } else if (config_.scheme == SchemeChoice::hybrid) {
    link_ = measure_link(world, config_, options.gemm_gflops, options.recorded_link);
  }
  SchedulerOptions scheduler;
  scheduler.config = config_;
  scheduler.first_iteration = options.first_iteration;
  scheduler.check_finite = options.check_finite;
  scheduler.compute = std::move(options.compute);
  scheduler.compression_state = std::move(options.compression_state);
  // Emulated, the exchanges' work is a wait: nothing is left to a GPU.
  if (net_.device().is_cuda() && !scheduler.compute) {
    gpu_gemm_ = std::make_unique<GpuGemm>(net_.device());
    scheduler.rebuild_gemm = [gemm = gpu_gemm_.get()](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                                      const float* a, const float* b, float beta, float* c) {
      (*gemm)(ta, tb, m, n, k, alpha, a, b, beta, c);
    };
    nccl_ = NcclTransport::connect(world, net_);
    scheduler.device_sums = nccl_.get();
  }
  auto plan_of = [&](Net& exchanged) {
    return plan_for_config(exchanged, config_, world.size(), link_.value_or(LinkModel{}),
                           options.pinned_plan ? &pinned : nullptr, &wires, 0, &ranks);
  };
  CommPlan plan = plan_of(net_);
  // MPI moves host memory: the layers of a GPU net whose scheme computes on
  // the host, or all of them where the ranks have no device transport (a
  // shared GPU, emulated compute), go through a host mirror; the others are
  // exchanged on the GPU (dist/plan/device_staging.h). A net none of whose
  // layers needs the host gets no mirror.
  std::vector<bool> staged(net_.num_layers(), true);
  if (nccl_ && !config_.host_staging) staged = layers_needing_host(plan, true);
  const bool any_staged = std::find(staged.begin(), staged.end(), true) != staged.end();
  if (config_.host_staging || (net_.device().is_cuda() && any_staged)) {
    mirror_ = std::make_unique<Net>(model, net_.batch(), Device{});
    copy_net_state(net_, *mirror_);
    plan = plan_of(*mirror_);
    exchange_unstaged_on_device(plan, staged, net_);
  }
  if (nccl_) {
    int on_gpu = 0, through_host = 0;  // layers with parameters
    for (size_t i = 0; i < plan.layer_groups.size(); ++i)
      if (!plan.layer_groups[i].empty()) ++(staged[i] ? through_host : on_gpu);
    gpu_exchange_ = through_host == 0 ? ", exchanged on the GPU by NCCL (no host mirror)"
                    : on_gpu == 0     ? ", all-reduce buckets summed by NCCL into a host mirror"
                                      : ", " + std::to_string(on_gpu) + " layers exchanged on the GPU by NCCL, " +
                                        std::to_string(through_host) + " through a host mirror";
  }
  place_solver_state(solver, plan);
  Net& exchanged = mirror_ ? *mirror_ : net_;
  scheduler_ = std::make_unique<Scheduler>(exchanged, solver, world, std::move(plan), std::move(scheduler));
  if (net_.device().is_cuda() && nccl_) device_sink_ = std::make_unique<DeviceGradientSink>(*scheduler_, *nccl_);
  if (mirror_) staging_ = std::make_unique<HostStagingSink>(net_, *mirror_, *scheduler_, staged, device_sink_.get());
}

Session::~Session() = default;

GradSink& Session::sink() {
  if (staging_) return *staging_;
  if (device_sink_) return *device_sink_;
  return *scheduler_;
}

void Session::sync() { scheduler_->sync(); }

void Session::bring_net_current() {
  scheduler_->sync();
  if (staging_) staging_->bring_staged_current();
}

void Session::average_buffers() {
  if (mirror_) copy_net_buffers(net_, *mirror_);
  scheduler_->average_buffers();
  if (mirror_) copy_net_buffers(*mirror_, net_);
}

std::vector<double> Session::sum_over_ranks(const std::vector<double>& values) {
  return scheduler_->sum_over_ranks(values);
}

Solver Session::solver_snapshot() { return scheduler_->solver_snapshot(); }

void Session::save_with_compression_state(const std::function<void(const std::vector<StreamedTensor>&)>& save) {
  scheduler_->save_with_compression_state(save);
}

CommStats Session::take_stats() { return scheduler_->take_stats(); }

bool Session::agree_to_stop(bool mine) {
  if (stop_vote_) return stop_vote_->vote(mine, [this] { scheduler_->check(); });
  return sum_over_ranks({mine ? 1.0 : 0.0})[0] > 0;
}

void Session::set_timeline(Timeline* timeline) {
  scheduler_->set_timeline(timeline);
  // A GPU net's gradients on their way to the host, on a lane of their own.
  if (staging_ && timeline) staging_->observe_landings(landing_recorder(*timeline));
}

const CommPlan& Session::plan() const { return scheduler_->plan(); }

PlanRecord Session::record() const {
  return plan_record(plan(), mirror_ ? *mirror_ : net_, link_.value_or(LinkModel{}));
}

int Session::rank() const { return scheduler_->rank(); }

int Session::size() const { return scheduler_->size(); }

std::string Session::describe() const {
  const std::string groups = describe_groups(plan());
  std::string line = std::to_string(size()) + " ranks, " + choice_name(config_.scheme) + " (" +
                     count_schemes(plan(), mirror_ ? *mirror_ : net_) + (groups.empty() ? "" : "; " + groups) +
                     "; per layer: poseidon plan)" + (config_.wfbp ? ", WFBP" : "") + gpu_exchange_;
  if (link_)
    line += "; link " + human_number(link_->bandwidth_gbps) + " Gbit/s, " + human_seconds(link_->latency_us * 1e-6) +
            ", GEMM " + human_number(link_->gemm_gflops) + " GFLOP/s";
  return line;
}

}  // namespace poseidon::dist
