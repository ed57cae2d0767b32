// The discrete-event engine behind dist/sim/simulate.h: events in time order
// (ties in the order they were scheduled), each rank's compute thread a small
// state machine, links reserved first come, first served.
#include "dist/sim/simulate.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/error.h"
#include "dist/plan/collective_costs.h"
#include "dist/plan/compression_plan.h"
#include "dist/plan/priority.h"
#include "dist/sim/device_costs.h"
#include "dist/sim/event_queue.h"

namespace poseidon::dist {

double SimResult::mean_utilisation() const {
  if (links.empty() || iteration_s <= 0) return 0;
  double busy = 0;
  for (const LinkBusy& l : links) busy += l.send_s + l.recv_s;
  return busy / (2.0 * static_cast<double>(links.size())) / iteration_s;
}

double SimResult::max_utilisation() const {
  double busiest = 0;
  for (const LinkBusy& l : links) busiest = std::max({busiest, l.send_s, l.recv_s});
  return iteration_s > 0 ? busiest / iteration_s : 0;
}

CommPlan simulation_plan(Net& net, const DistConfig& config, int workers, const LinkModel& link, int64_t batch) {
  return plan_for_config(net, config, workers, link, nullptr, nullptr, batch);
}

namespace {

class Simulation {
 public:
  Simulation(const Net& net, const CommPlan& plan, const ComputeProfile& profile, const SimConfig& config);
  void run();
  // The steady-state iteration, the links' busy time and the bytes moved.
  void fill(SimResult& result) const;

 private:
  // What happens at an event, and to what: a rank's layer computed, a
  // group started on a rank, a PS block's owner done updating, a rank's part
  // of an operation done, or a message beginning to leave its sender's link
  // (claiming the receiver's) or arriving. A plain value: queuing the
  // millions of messages of a large cluster allocates nothing per message.
  struct Event {
    enum class Kind : uint8_t {
      forward_done, backward_done, start_unit, owner_updated, operation_done, message_sent, message_arrived
    };
    Kind kind;
    bool push = false;    // message: a gradient to the block's owner, else the owner's new values
    bool queued = false;  // message: left through its sender's PrioritySends
    int rank = 0;         // the rank it happens on; a message's sender
    int peer = 0;         // a message's receiver
    int round = 0;        // the group's iteration
    uint32_t unit = 0, block = 0;
    double bytes = 0;  // message
    double sent = 0;   // message: when its last byte has left the sender's link
  };
  struct Rank {
    // Compute thread.
    int iteration = 0;
    size_t layer = 0;
    bool backward = false, computing = false;
    std::vector<double> backward_end;  // per iteration
    // Communication thread.
    std::vector<size_t> reported;  // per group: parameters backward reported this iteration
    std::vector<bool> ready;       // per group: all reported, not yet started
    size_t next_unit = 0;
    std::vector<int> started, done;  // per group: iterations started, finished
    std::vector<int> pending;        // per group: operations of its running iteration
    double device_free = 0;          // updates, sums and SFB rebuilds run one at a time
    std::unique_ptr<PrioritySends> sends;
    // Links.
    double send_free = 0, recv_free = 0;
    double bytes = 0;            // sent plus received, all iterations
    std::vector<LinkBusy> busy;  // per iteration
  };
  struct UnitCost {
    double numel = 0;
    double update_s = 0;   // the solver update of its parameters
    int64_t priority = 0;  // its layer: PrioritySends sends lower layers first
    double hold_s = 0;     // collectives: the steps' transfers and latencies
    double busy_s = 0;     // collectives: each host link's busy time, each way
    double bytes = 0;      // collectives: sent plus received per rank
    double sums_s = 0;     // all-reduce: the sums after the reduce-scatter's steps
    double rebuild_s = 0;  // sfb: the GEMM that rebuilds the gradient
  };

  void at(double time, const Event& event) { events_.at(time, event); }
  void dispatch(const Event& event);
  void advance(int n);
  void forward_done(int n);
  void backward_done(int n);
  bool gate_open(const Rank& r, size_t layer) const;
  void start_ready(int n);
  void start_unit(int n, size_t u);
  void push_arrived(size_t u, size_t b, int round);
  void send_values(int owner, size_t u, size_t b, int round);
  void operation_done(int n, size_t u);
  void send(int from, int to, size_t u, size_t b, int round);
  void transmit(const Event& message);
  void message_sent(Event message);
  void message_arrived(const Event& message);
  void run_collective(size_t u, int round);
  // The rank whose Rank holds the link of `n`'s host: ranks of a host share one.
  int link_of(int n) const { return n - n % per_host_; }

  const CommPlan& plan_;
  const ComputeProfile& profile_;
  const DeviceCosts device_;
  const SimConfig& config_;
  const int ranks_count_;
  const int iterations_;
  const double seconds_per_byte_;
  const double latency_s_;
  const int per_host_;
  std::vector<Rank> ranks_;
  std::vector<UnitCost> costs_;
  std::vector<std::vector<size_t>> reports_;  // per layer: the group of each parameter backward reports
  std::vector<std::vector<int>> pushes_;      // per PS group and block: gradients at the owner
  std::vector<int> collective_started_;       // per group: ranks that started it
  EventQueue<Event> events_;                  // lanes: each link's sends beginning, then each link's arrivals
  double now_ = 0;
};

Simulation::Simulation(const Net& net, const CommPlan& plan, const ComputeProfile& profile, const SimConfig& config)
    : plan_(plan),
      profile_(profile),
      device_(device_costs(profile, net, config.link.gemm_gflops)),
      config_(config),
      ranks_count_(config.workers),
      iterations_(config.iterations),
      seconds_per_byte_(8 / (config.link.bandwidth_gbps * 1e9)),
      latency_s_(config.link.latency_us * 1e-6),
      per_host_(std::clamp(config.dist.collective.ranks_per_host, 1, config.workers)),
      ranks_(config.workers),
      events_(2 * static_cast<size_t>(config.workers)) {
  const size_t groups = plan.groups.size();
  for (Rank& r : ranks_) {
    r.backward_end.assign(iterations_, 0);
    r.reported.assign(groups, 0);
    r.ready.assign(groups, false);
    r.started.assign(groups, 0);
    r.done.assign(groups, 0);
    r.pending.assign(groups, 0);
    r.busy.assign(iterations_, {});
    if (config.dist.order == SendOrder::priority)
      r.sends = std::make_unique<PrioritySends>(priority_window_bytes(config.dist.block_bytes, config.workers));
  }
  reports_.assign(net.num_layers(), {});
  costs_.assign(groups, {});
  pushes_.assign(groups, {});
  collective_started_.assign(groups, 0);
  for (size_t u = 0; u < groups; ++u)
    for (size_t i : plan.groups[u].params) {
      reports_[plan.params[i].layer].push_back(u);
      costs_[u].numel += static_cast<double>(plan.params[i].param->value.numel());
    }
  const int p = ranks_count_;
  const int64_t k = profile.batch;
  const CollectiveOptions& options = config.dist.collective;
  for (size_t u = 0; u < groups; ++u) {
    const SyncGroup& group = plan.groups[u];
    UnitCost& c = costs_[u];
    c.update_s = device_.update_s(static_cast<int64_t>(c.numel));
    c.priority = static_cast<int64_t>(plan.params[group.params[0]].layer);
    if (group.scheme == Scheme::ps) {
      pushes_[u].assign(group.blocks.size(), 0);
    } else if (group.scheme == Scheme::allreduce) {
      // The planner's bytes: the parameters, not any gaps of the bucket's range.
      // On a 16-bit wire the transfers shrink, the latencies do not.
      const double wire = static_cast<double>(wire_bytes(group.wire)) / 4;
      const auto steps = allreduce_steps(group.algorithm, c.numel, p, config.link, options);
      const double latencies =
          steps_seconds(allreduce_steps(group.algorithm, 0, p, config.link, options), config.link, options);
      c.hold_s = latencies + (steps_seconds(steps, config.link, options) - latencies) * wire;
      c.busy_s = steps_link_busy(steps, config.link) * wire;
      c.bytes = steps_floats(steps) * 4 * wire;
      // The chunks cut the bucket's whole range, padding included.
      const double range = static_cast<double>(group.end - group.begin) / c.numel;
      for (const CollectiveStep& s : steps)
        if (s.summed > 0) c.sums_s += device_.sum_s(static_cast<int64_t>(s.summed * range), 2);
    } else if (group.scheme == Scheme::lowrank) {
      // Two all-reduces of its factors by the plan's algorithm, each summing
      // step followed by its sum; the rank-r GEMMs (6 n m r flops: three
      // GEMMs of an n x m matrix by r columns) charged as a rebuild of 3 r rows.
      const Shape& w = plan.params[group.params[0]].param->shape;
      const int64_t rows = w[0], cols = shape_numel(w) / rows;
      const int rank = group.rank;
      const auto steps = lowrank_steps(group.algorithm, rows, cols, static_cast<int64_t>(c.numel) - rows * cols, rank, p,
                                       config.link, options);
      c.hold_s = steps_seconds(steps, config.link, options);
      c.busy_s = steps_link_busy(steps, config.link);
      c.bytes = steps_floats(steps) * 4;
      for (const CollectiveStep& s : steps)
        if (s.summed > 0) c.sums_s += device_.sum_s(static_cast<int64_t>(s.summed), 2);
      c.rebuild_s = device_.rebuild_s(rows, cols, 3 * rank, false);
    } else {
      const Shape& w = plan.params[group.params[0]].param->shape;
      const int steps = p - 1;
      const double step_bytes = sfb_cost(w[0], w[1], k, p, config.link).bytes() / 2 / steps;
      c.busy_s = steps * step_bytes * seconds_per_byte_;
      c.hold_s = c.busy_s + steps * latency_s_;
      c.bytes = 2 * steps * step_bytes;
      c.rebuild_s = device_.rebuild_s(w[0], w[1], p * k, group.params.size() > 1);
    }
  }
}

void Simulation::run() {
  for (int n = 0; n < ranks_count_; ++n) advance(n);
  while (!events_.empty()) {
    auto [time, event] = events_.pop();
    now_ = time;
    dispatch(event);
  }
  for (const Rank& r : ranks_) POSEIDON_CHECK(r.iteration == iterations_) << "simulation stalled";
}

void Simulation::dispatch(const Event& e) {
  switch (e.kind) {
    case Event::Kind::forward_done: return forward_done(e.rank);
    case Event::Kind::backward_done: return backward_done(e.rank);
    case Event::Kind::start_unit: return start_unit(e.rank, e.unit);
    case Event::Kind::owner_updated: return send_values(e.rank, e.unit, e.block, e.round);
    case Event::Kind::operation_done: return operation_done(e.rank, e.unit);
    case Event::Kind::message_sent: return message_sent(e);
    case Event::Kind::message_arrived: return message_arrived(e);
  }
}

void Simulation::advance(int n) {
  Rank& r = ranks_[n];
  if (r.computing || r.iteration == iterations_) return;
  if (!r.backward) {
    if (r.iteration > 0 && !gate_open(r, r.layer)) return;  // a finishing group calls again
    r.computing = true;
    at(now_ + profile_.forward_s[r.layer], Event{Event::Kind::forward_done, false, false, n});
  } else {
    r.computing = true;
    at(now_ + profile_.backward_s[r.layer], Event{Event::Kind::backward_done, false, false, n});
  }
}

bool Simulation::gate_open(const Rank& r, size_t layer) const {
  if (!config_.dist.wfbp) {
    if (layer > 0) return true;
    return std::all_of(r.done.begin(), r.done.end(), [&](int d) { return d >= r.iteration; });
  }
  for (size_t u : plan_.layer_groups[layer])
    if (r.done[u] < r.iteration) return false;
  return true;
}

void Simulation::forward_done(int n) {
  Rank& r = ranks_[n];
  r.computing = false;
  if (++r.layer == profile_.forward_s.size()) {
    r.backward = true;
    --r.layer;
  }
  advance(n);
}

void Simulation::backward_done(int n) {
  Rank& r = ranks_[n];
  r.computing = false;
  for (size_t u : reports_[r.layer])
    if (++r.reported[u] == plan_.groups[u].params.size()) {
      r.reported[u] = 0;
      r.ready[u] = true;
    }
  if (config_.dist.wfbp) start_ready(n);
  if (r.layer > 0) {
    --r.layer;
  } else {
    r.backward_end[r.iteration++] = now_;
    r.backward = false;
    if (!config_.dist.wfbp) start_ready(n);  // backward_done hands everything over at once
  }
  advance(n);
}

void Simulation::start_ready(int n) {
  Rank& r = ranks_[n];
  if (r.ready.empty()) return;
  while (r.ready[r.next_unit]) {
    const size_t u = r.next_unit;
    r.ready[u] = false;
    r.next_unit = (u + 1) % r.ready.size();
    Event start{Event::Kind::start_unit, false, false, n};
    start.unit = static_cast<uint32_t>(u);
    at(now_, start);
  }
}

void Simulation::start_unit(int n, size_t u) {
  Rank& r = ranks_[n];
  const int round = r.started[u]++;
  POSEIDON_CHECK(r.pending[u] == 0 && r.done[u] == round) << "group " << u << " restarted before it finished";
  const SyncGroup& group = plan_.groups[u];
  if (group.scheme != Scheme::ps) {
    r.pending[u] = 1;
    if (++collective_started_[u] == ranks_count_) {
      collective_started_[u] = 0;
      run_collective(u, round);
    }
    return;
  }
  for (size_t b = 0; b < group.blocks.size(); ++b) {
    const int owner = group.blocks[b].owner;
    if (owner == n) {
      r.pending[u] += ranks_count_ - 1;  // its new values to every other rank
      push_arrived(u, b, round);
    } else {
      r.pending[u] += 2;  // the push, and the new values back
      send(n, owner, u, b, round);
    }
  }
}

void Simulation::push_arrived(size_t u, size_t b, int round) {
  if (++pushes_[u][b] < ranks_count_) return;
  pushes_[u][b] = 0;
  const PsBlock& block = plan_.groups[u].blocks[b];
  Rank& owner = ranks_[block.owner];
  owner.device_free =
      std::max(now_, owner.device_free) + device_.sum_s(block.count, ranks_count_) + device_.update_s(block.count);
  Event updated{Event::Kind::owner_updated, false, false, block.owner, 0, round};
  updated.unit = static_cast<uint32_t>(u);
  updated.block = static_cast<uint32_t>(b);
  at(owner.device_free, updated);
}

void Simulation::send_values(int owner, size_t u, size_t b, int round) {
  for (int peer = 0; peer < ranks_count_; ++peer)
    if (peer != owner) send(owner, peer, u, b, round);
}

void Simulation::operation_done(int n, size_t u) {
  Rank& r = ranks_[n];
  if (--r.pending[u] > 0) return;
  ++r.done[u];
  advance(n);
}

void Simulation::send(int from, int to, size_t u, size_t b, int round) {
  // A push (to the owner) travels on the group's wire format; values as fp32.
  const SyncGroup& group = plan_.groups[u];
  Event message{Event::Kind::message_sent, group.blocks[b].owner == to, false, from, to, round};
  message.unit = static_cast<uint32_t>(u);
  message.block = static_cast<uint32_t>(b);
  const int64_t width = message.push ? wire_bytes(group.wire) : 4;
  message.bytes = static_cast<double>(group.blocks[b].count) * static_cast<double>(width);
  PrioritySends* queue = ranks_[from].sends.get();
  if (!queue) return transmit(message);
  message.queued = true;
  queue->submit(costs_[u].priority, ps_send_sequence(b, group.blocks[b].id, from, to, ranks_count_),
                static_cast<int64_t>(message.bytes), [this, message] { transmit(message); });
  queue->pump();
}

void Simulation::transmit(const Event& message) {
  const int from = message.rank, to = message.peer;
  const double bytes = message.bytes;
  if (link_of(from) == link_of(to)) {  // inside a host: its own fabric, not the host's link
    ranks_[from].bytes += bytes;
    ranks_[to].bytes += bytes;
    const CollectiveOptions& o = config_.dist.collective;
    Event arrival = message;
    arrival.kind = Event::Kind::message_arrived;
    return at(now_ + bytes * 8 / (o.host_bandwidth_gbps * 1e9) + o.host_latency_us * 1e-6, arrival);
  }
  Rank& s = ranks_[link_of(from)];
  const double busy = bytes * seconds_per_byte_;
  // A send link sends its messages one after another. The switch buffers: a
  // sender is never held by a busy receiver, and the receiver takes the bytes
  // in once they are sent and its link is free, in the order their sending
  // began (claimed then, not when queued: a message queued behind others on
  // its sender must not hold the receiver's link idle meanwhile).
  const double begin = std::max(now_, s.send_free);
  s.send_free = begin + busy;
  s.busy[message.round].send_s += busy;
  ranks_[from].bytes += bytes;
  Event sending = message;
  sending.kind = Event::Kind::message_sent;
  sending.sent = begin + busy;
  events_.at(static_cast<size_t>(link_of(from)), begin, sending);
}

void Simulation::message_sent(Event message) {
  const int to = message.peer;
  const double busy = message.bytes * seconds_per_byte_;
  Rank& d = ranks_[link_of(to)];
  const double received = std::max(message.sent, d.recv_free + busy);
  d.recv_free = received;
  d.busy[message.round].recv_s += busy;
  ranks_[to].bytes += message.bytes;
  message.kind = Event::Kind::message_arrived;
  events_.at(static_cast<size_t>(ranks_count_ + link_of(to)), received + latency_s_, message);
}

void Simulation::message_arrived(const Event& message) {
  if (message.queued) {
    PrioritySends& queue = *ranks_[message.rank].sends;
    queue.sent(static_cast<int64_t>(message.bytes));
    queue.pump();
  }
  operation_done(message.rank, message.unit);
  if (message.push)
    push_arrived(message.unit, message.block, message.round);
  else
    operation_done(message.peer, message.unit);
}

void Simulation::run_collective(size_t u, int round) {
  const UnitCost& c = costs_[u];
  double start = now_;
  for (const Rank& r : ranks_) start = std::max({start, r.send_free, r.recv_free});
  const double end = start + c.hold_s + c.sums_s;
  for (int n = 0; n < ranks_count_; ++n) {
    Rank& r = ranks_[n];
    r.send_free = r.recv_free = end - latency_s_;
    if (n == link_of(n)) {
      r.busy[round].send_s += c.busy_s;
      r.busy[round].recv_s += c.busy_s;
    }
    r.bytes += c.bytes;
    r.device_free = std::max(end, r.device_free) + c.rebuild_s + c.update_s;
    Event done{Event::Kind::operation_done, false, false, n};
    done.unit = static_cast<uint32_t>(u);
    at(r.device_free, done);
  }
}

void Simulation::fill(SimResult& result) const {
  const int half = iterations_ / 2;
  auto last_backward_end = [&](int iteration) {
    double t = 0;
    for (const Rank& r : ranks_) t = std::max(t, r.backward_end[iteration]);
    return t;
  };
  const int measured = iterations_ - half;
  result.iteration_s = (last_backward_end(iterations_ - 1) - last_backward_end(half - 1)) / measured;
  double bytes = 0;
  result.links.clear();
  for (int n = 0; n < ranks_count_; ++n) {
    const Rank& r = ranks_[n];
    bytes += r.bytes;
    if (link_of(n) != n) continue;  // its host's link is reported once
    LinkBusy mean;
    for (int i = half; i < iterations_; ++i) {
      mean.send_s += r.busy[i].send_s / measured;
      mean.recv_s += r.busy[i].recv_s / measured;
    }
    result.links.push_back(mean);
  }
  result.bytes_per_worker = bytes / ranks_count_ / iterations_;
}

}  // namespace

SimResult simulate(Net& net, const ComputeProfile& profile, const SimConfig& config) {
  POSEIDON_CHECK(config.workers >= 1 && config.iterations >= 2) << config.workers << " " << config.iterations;
  POSEIDON_CHECK(profile.forward_s.size() == net.num_layers() && profile.backward_s.size() == net.num_layers())
      << "profile of " << profile.forward_s.size() << " layers for " << net.num_layers();
  SimResult result;
  result.workers = config.workers;
  result.single_s = profile.iteration_s();
  const CommPlan plan = simulation_plan(net, config.dist, config.workers, config.link, profile.batch);
  result.schemes = describe_schemes(plan, net);
  if (config.workers == 1) {  // no scheduler on one rank: forward, backward, update
    result.iteration_s = result.single_s;
    result.links.assign(1, {});
    return result;
  }
  Simulation simulation(net, plan, profile, config);
  simulation.run();
  simulation.fill(result);
  return result;
}

}  // namespace poseidon::dist
