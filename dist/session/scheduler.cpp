// The communication thread, the per-layer gates and the collectives run
// between iterations.
#include "dist/session/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/device_memory.h"
#include "core/finite_check.h"
#include "core/math.h"
#include "dist/plan/priority.h"
#include "dist/schemes/exchange_registry.h"

namespace poseidon::dist {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Between polls the thread sleeps (or until a group becomes ready) instead of
// spinning on a core the compute thread, the data loader and the kernel's
// network stack need: 50 us after a poll that finished something, twice as
// long after each that finished nothing, up to 800 us (a socket buffer
// holds more than that at the link's rate; timed work, such as an emulated
// device's, ends
// the sleep when it is due).
constexpr auto kPollPause = std::chrono::microseconds(50);
constexpr auto kPollPauseMax = std::chrono::microseconds(800);
// With nothing in flight the thread still wakes this often to answer other
// ranks' stall questions.
constexpr auto kIdlePause = std::chrono::milliseconds(10);

uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
}  // namespace

Scheduler::Scheduler(Net& net, Solver& solver, const World& world, CommPlan plan, SchedulerOptions options)
    : net_(net),
      solver_(solver),
      plan_(std::move(plan)),
      config_(std::move(options.config)),
      comm_(std::make_unique<Comm>(world)),
      first_iteration_(options.first_iteration),
      check_finite_(options.check_finite),
      compute_(std::make_shared<TracingCompute>(
          options.compute ? std::move(options.compute)
                          : std::make_shared<HostCompute>(std::move(options.rebuild_gemm)))) {
  POSEIDON_CHECK(plan_.world_size == comm_->size()) << plan_.world_size << " vs " << comm_->size();
  for (size_t i = 0; i < net_.num_layers(); ++i) layer_index_[&net_.layer(i)] = i;
  shared_transport_ = std::make_unique<HostTransport>(
      *comm_, config_.order == SendOrder::priority ? priority_window_bytes(config_.block_bytes, comm_->size()) : 0);
  // two_level's hosts: as the config emulates them, else as MPI's shared-memory split finds them.
  const int per_host =
      config_.collective.ranks_per_host > 1 ? config_.collective.ranks_per_host : world.local_size();
  const ExchangeSetup setup{net_,    plan_,   solver_, *compute_, *comm_, *shared_transport_, options.device_sums,
                            config_, per_host};
  for (size_t g = 0; g < plan_.groups.size(); ++g) {
    const SyncGroup& group = plan_.groups[g];
    std::unique_ptr<Exchange> ex = ExchangeRegistry::instance().create(setup, group);
    for (size_t i : group.params) {
      Param* param = plan_.params[i].param;
      group_of_param_[param] = g;
      if (const std::vector<BlobPart>* sources = ex->gradient_sources(*param)) formed_[param] = sources;
    }
    group_of_exchange_[ex.get()] = g;
    exchanges_.push_back(std::move(ex));
  }
  for (const auto& ex : exchanges_) ex->restore(solver_, options.compression_state);

  inspector_ = std::make_unique<StallInspector>(*comm_);
  const size_t n = plan_.groups.size();
  ready_params_.assign(n, 0);
  ready_.assign(n, false);
  done_rounds_.assign(n, 0);
  group_started_.resize(n);
  // The exchanges' arithmetic (SFB's rebuild GEMM, PS updates) runs on this
  // thread with the caller's thread count, not OpenMP's default: OpenBLAS
  // partitions a GEMM by its threads, and its sums' order with it, so the
  // rebuild equals the same GEMM on the caller's thread bit for bit.
  thread_ = std::thread([this, threads = num_threads()] {
    set_num_threads(threads);
    loop();
  });
  try {
    check_replicas_identical();
  } catch (...) {
    stop_thread();
    throw;
  }
}

Scheduler::~Scheduler() { stop_thread(); }

void Scheduler::stop_thread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
}

void Scheduler::rethrow_locked() const {
  if (error_) std::rethrow_exception(error_);
}

bool Scheduler::groups_done_locked() const {
  for (int64_t d : done_rounds_)
    if (d < handed_rounds_) return false;
  return true;
}

void Scheduler::await_params(const Layer& layer) {
  auto it = layer_index_.find(&layer);
  POSEIDON_CHECK(it != layer_index_.end()) << "layer '" << layer.name() << "' is not in the scheduled net";
  const std::vector<size_t>& groups = plan_.layer_groups[it->second];
  if (groups.empty()) return;
  std::unique_lock lock(mutex_);
  auto open = [&] {
    for (size_t u : groups)
      if (done_rounds_[u] < handed_rounds_) return false;
    return true;
  };
  if (!open()) {
    const auto t0 = Clock::now();
    gates_.wait(lock, [&] { return error_ || open(); });
    stats_.wait_s += seconds_since(t0);
  }
  rethrow_locked();
}

const std::vector<BlobPart>& Scheduler::gradient_sources(const Param& param) const {
  auto it = formed_.find(&param);
  return it == formed_.end() ? no_sources() : *it->second;
}

void Scheduler::grad_ready(Param& param) {
  auto it = group_of_param_.find(&param);
  POSEIDON_CHECK(it != group_of_param_.end()) << "parameter '" << param.name << "' is not in the plan";
  const size_t u = it->second;
  if (check_finite_ && !formed_.count(&param) && !param.grad_bounded) check_gradient_finite(param);
  std::unique_lock lock(mutex_);
  rethrow_locked();
  if (++ready_params_[u] < static_cast<int>(plan_.groups[u].params.size())) return;
  ready_params_[u] = 0;
  POSEIDON_CHECK(done_rounds_[u] == handed_rounds_) << plan_.groups[u].label << ": ready again before it was synced";
  lock.unlock();
  exchanges_[u]->snapshot_operands();   // the communication thread does not touch the exchange until it is started
  if (!config_.wfbp) return;  // handed over by backward_done
  lock.lock();
  ready_[u] = true;
  work_.notify_one();
}

void Scheduler::backward_done() {
  std::unique_lock lock(mutex_);
  rethrow_locked();
  for (size_t u = 0; u < plan_.groups.size(); ++u)
    POSEIDON_CHECK(ready_params_[u] == 0) << "backward did not report every parameter of " << plan_.groups[u].label;
  ++handed_rounds_;
  ++stats_.iterations;
  if (config_.wfbp) return;
  std::fill(ready_.begin(), ready_.end(), true);
  work_.notify_one();
  const auto t0 = Clock::now();
  gates_.wait(lock, [&] { return error_ || groups_done_locked(); });
  stats_.wait_s += seconds_since(t0);
  rethrow_locked();
}

void Scheduler::check() {
  std::lock_guard lock(mutex_);
  rethrow_locked();
}

void Scheduler::sync() {
  std::unique_lock lock(mutex_);
  const auto t0 = Clock::now();
  gates_.wait(lock, [&] { return error_ || groups_done_locked(); });
  stats_.wait_s += seconds_since(t0);  // the compute thread waits for transfers here too
  rethrow_locked();
}

void Scheduler::run(const std::function<void(const Comm&)>& task) {
  sync();
  std::exception_ptr failure;
  bool done = false;
  std::unique_lock lock(mutex_);
  task_ = [&] {
    try {
      task(*comm_);
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard inner(mutex_);
    done = true;
    gates_.notify_all();
  };
  work_.notify_one();
  gates_.wait(lock, [&] { return done || error_; });
  rethrow_locked();
  if (failure) std::rethrow_exception(failure);
}

void Scheduler::set_timeline(Timeline* timeline) {
  if (timeline)
    for (size_t u = 0; u < plan_.groups.size(); ++u)
      timeline->name_lane(Timeline::group_lane(u),
                          "comm " + scheme_name(plan_.groups[u].scheme) + ": " + plan_.groups[u].label);
  compute_->set_timeline(timeline);
  timeline_ = timeline;
}

void Scheduler::start_group(size_t u) {
  solver_.set_iteration(first_iteration_ + started_rounds_);
  group_started_[u] = Timeline::Clock::now();
  if (u + 1 == plan_.groups.size()) ++started_rounds_;
  Exchange& ex = *exchanges_[u];
  ex.start(in_flight_);
  if (ex.operations_in_flight() == 0) finish_group(u);
}

void Scheduler::finish_group(size_t u) {
  if (Timeline* t = timeline_.load())
    t->add(plan_.groups[u].label, scheme_name(plan_.groups[u].scheme), Timeline::group_lane(u), group_started_[u],
           Timeline::Clock::now(), {{"iteration", first_iteration_ + done_rounds_[u]}});
  std::lock_guard lock(mutex_);
  ++done_rounds_[u];
  stats_.bytes_sent = in_flight_.bytes_sent();
  stats_.bytes_received = in_flight_.bytes_received();
  gates_.notify_all();
}

void Scheduler::loop() {
  bool busy = false;
  Clock::time_point busy_since;
  Clock::duration pause = kPollPause;
  int64_t finished = 0;
  try {
    for (;;) {
      std::vector<size_t> starting;
      std::function<void()> task;
      int64_t progress = 0;
      {
        std::unique_lock lock(mutex_);
        auto wake = [&] { return stop_ || (!ready_.empty() && ready_[next_group_]) || task_ != nullptr; };
        if (in_flight_.empty()) work_.wait_for(lock, kIdlePause, wake);
        if (stop_) return;
        progress = handed_rounds_;
        while (!ready_.empty() && ready_[next_group_]) {
          ready_[next_group_] = false;
          starting.push_back(next_group_);
          next_group_ = (next_group_ + 1) % ready_.size();
        }
        if (starting.empty() && in_flight_.empty()) task = std::exchange(task_, nullptr);
      }
      inspector_->answer(progress);
      if (task) task();
      for (size_t u : starting) start_group(u);
      shared_transport_->pump();
      std::vector<Exchange*> finished_exchanges;
      if (!in_flight_.empty()) {
        finished_exchanges = in_flight_.poll();
        shared_transport_->pump();
        if (const std::string* what = in_flight_.stalled(config_.timeout_s)) {
          std::string message = "no progress for " + std::to_string(static_cast<int>(config_.timeout_s)) +
                                " s (dist.timeout_s) waiting for " + *what;
          const std::string culprits = inspector_->inspect(progress, std::min(10.0, config_.timeout_s));
          if (!culprits.empty()) message += "; " + culprits;
          throw CommError(message);
        }
      }
      const bool now_busy = !in_flight_.empty();
      if (now_busy && !busy) busy_since = Clock::now();
      if (!now_busy && busy) {
        std::lock_guard lock(mutex_);
        stats_.comm_s += seconds_since(busy_since);
      }
      busy = now_busy;
      // Announced after the busy time is counted: a sync() that returns on
      // the last group then takes statistics that include its transfer.
      for (Exchange* ex : finished_exchanges) finish_group(group_of_exchange_.at(ex));
      const bool progressed = !starting.empty() || in_flight_.finished() != finished;
      finished = in_flight_.finished();
      pause = progressed ? Clock::duration(kPollPause) : std::min<Clock::duration>(2 * pause, kPollPauseMax);
      if (now_busy) {
        std::unique_lock lock(mutex_);
        work_.wait_for(lock, std::min(pause, in_flight_.until_timed_done()),
                       [&] { return stop_ || (!ready_.empty() && ready_[next_group_]); });
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    error_ = std::make_exception_ptr(CommError(e.what()));
    gates_.notify_all();
  }
}

CommStats Scheduler::take_stats() {
  std::lock_guard lock(mutex_);
  CommStats out = stats_;
  out.bytes_sent -= reported_.bytes_sent;
  out.bytes_received -= reported_.bytes_received;
  out.comm_s -= reported_.comm_s;
  out.wait_s -= reported_.wait_s;
  out.iterations -= reported_.iterations;
  reported_ = stats_;
  return out;
}

std::vector<double> Scheduler::sum_over_ranks(const std::vector<double>& values) {
  std::vector<double> out(values.size());
  run([&](const Comm& c) {
    const int n = static_cast<int>(values.size());
    POSEIDON_MPI(MPI_Reduce(values.data(), out.data(), n, MPI_DOUBLE, MPI_SUM, 0, c.handle()));
    POSEIDON_MPI(MPI_Bcast(out.data(), n, MPI_DOUBLE, 0, c.handle()));
  });
  return out;
}

void Scheduler::average_buffers() {
  std::vector<Param*> buffers;
  for (Param* p : net_.params())
    if (!p->learnable) buffers.push_back(p);
  if (buffers.empty()) return;
  run([&](const Comm& c) {
    const float scale = 1.f / static_cast<float>(c.size());
    for (Param* p : buffers) {
      const int n = static_cast<int>(p->value.numel());
      // MPI moves host memory: a net exchanged on its GPU sends a host copy.
      const Tensor mine = p->value.is_cuda() ? p->value.to(Device{}) : p->value;
      std::vector<float> sum(n);
      POSEIDON_MPI(MPI_Reduce(mine.data(), sum.data(), n, MPI_FLOAT, MPI_SUM, 0, c.handle()));
      for (float& v : sum) v *= scale;
      POSEIDON_MPI(MPI_Bcast(sum.data(), n, MPI_FLOAT, 0, c.handle()));
      device_memory::copy(p->value.data(), p->value.device(), sum.data(), Device{}, static_cast<size_t>(n));
      p->rounded.current = false;
    }
  });
}

Solver Scheduler::solver_snapshot(int root) {
  sync();
  Solver copy = solver_;
  run([&](const Comm&) {
    for (const auto& ex : exchanges_) ex->gather_solver_state(copy, root);
  });
  return copy;
}

void Scheduler::save_with_compression_state(const std::function<void(const std::vector<StreamedTensor>&)>& save,
                                            int root) {
  std::vector<ExchangeStateEntry> state;
  for (const auto& ex : exchanges_)
    for (ExchangeStateEntry& entry : ex->state_entries()) state.push_back(std::move(entry));
  std::vector<const ExchangeStateEntry*> collective;
  for (const ExchangeStateEntry& entry : state)
    if (entry.collective) collective.push_back(&entry);
  if (comm_->rank() != root) {
    run([&](const Comm&) {
      for (const ExchangeStateEntry* entry : collective) entry->write(root, {});
    });
    return;
  }
  std::vector<StreamedTensor> entries;
  size_t started = 0;  // collective entries whose writing began, in order
  for (const ExchangeStateEntry& entry : state) {
    if (!entry.collective) {
      entries.push_back({entry.name, entry.shape, [&entry, root](const StreamedTensor::Writer& write) {
                           entry.write(root, write);
                         }});
      continue;
    }
    entries.push_back({entry.name, entry.shape, [this, &entry, root, &started](const StreamedTensor::Writer& write) {
                         ++started;
                         run([&](const Comm&) { entry.write(root, write); });
                       }});
  }
  // The other ranks send their parts whatever happens here: what `save` did
  // not take is received and dropped, so none of them waits for ever.
  auto drain = [&] {
    run([&](const Comm&) {
      for (size_t i = started; i < collective.size(); ++i) collective[i]->write(root, {});
    });
  };
  try {
    save(entries);
  } catch (...) {
    drain();
    throw;
  }
  const size_t taken = started;
  drain();
  POSEIDON_CHECK(taken == collective.size())
      << "the checkpoint took " << taken << " of " << collective.size() << " collective exchange state entries";
}

void Scheduler::check_gradient_finite(const Param& param) const {
  // A net exchanged on its GPU: the device's check, which waits for the
  // gradient (the price of solver.check_finite there).
  const int64_t at = param.grad.is_cuda()
                         ? device_memory::gpu_first_non_finite(param.grad.device(), param.grad.data(),
                                                               static_cast<size_t>(param.grad.numel()))
                         : (all_finite(param.grad.data(), param.grad.numel())
                                ? -1
                                : first_non_finite(param.grad.data(), param.grad.numel()));
  if (at < 0) return;
  const float value = param.grad.is_cuda() ? param.grad.to(Device{})[at] : param.grad[at];
  throw Error("non-finite gradient of '" + param.name + "' (first at index " + std::to_string(at) + ": " +
              non_finite_text(value) + ")");
}

void Scheduler::check_replicas_identical() {
  // A net exchanged on its GPU is compared by a host copy of its parameters.
  const Tensor values = net_.flat_values().is_cuda() ? net_.flat_values().to(Device{}) : net_.flat_values();
  const uint64_t mine = fnv1a(values.data(), values.numel() * sizeof(float));
  std::vector<uint64_t> all(comm_->size());
  run([&](const Comm& c) {
    POSEIDON_MPI(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, c.handle()));
  });
  for (int r = 1; r < comm_->size(); ++r)
    if (all[r] != all[0])
      throw Error("rank " + std::to_string(r) +
                  " starts from other parameters than rank 0 (do all ranks read the "
                  "same --weights or --resume file?)");
}

}  // namespace poseidon::dist
