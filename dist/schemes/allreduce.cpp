// Bucket all-reduce as this rank's steps of the plan's algorithm, then the Solver update.
#include "dist/schemes/allreduce.h"

#include <algorithm>
#include <limits>

#include "dist/schemes/device_allreduce.h"
#include "dist/schemes/exchange_registry.h"

namespace poseidon::dist {

namespace {
std::unique_ptr<Exchange> make_allreduce(const ExchangeSetup& setup, const SyncGroup& group) {
  std::vector<Param*> params;
  for (size_t i : group.params) params.push_back(setup.plan.params[i].param);
  // Parameters exchanged on their GPU (dist/plan/device_staging.h): the
  // device transport averages the bucket there, in either wire, and the
  // update follows there.
  if (!params.empty() && params.front()->value.is_cuda()) {
    if (!setup.device_sums) throw Error("the all-reduce of " + group.label + " on a GPU needs a device transport");
    return std::make_unique<DeviceAllreduceExchange>(
        *setup.device_sums, setup.solver, setup.compute, std::move(params),
        DeviceBucket{group.begin, group.end - group.begin, group.wire, group.label});
  }
  // Through a host mirror NCCL sums fp32 into it; a bucket on the bf16 wire keeps the MPI steps.
  DeviceTransport* device_sums = group.wire == Wire::fp32 ? setup.device_sums : nullptr;
  return std::make_unique<AllreduceExchange>(setup.comm.duplicate(), setup.solver, setup.compute, std::move(params),
                                             setup.net.flat_grads().data() + group.begin, group.begin,
                                             group.end - group.begin, group.label, device_sums, group.wire,
                                             group.algorithm, setup.ranks_per_host);
}
}  // namespace

POSEIDON_REGISTER_EXCHANGE(Scheme::allreduce, make_allreduce);

AllreduceExchange::AllreduceExchange(Comm comm, Solver& solver, ExchangeCompute& compute,
                                     std::vector<Param*> params, float* grads, int64_t begin, int64_t count,
                                     std::string label, DeviceTransport* device_sums, Wire wire,
                                     AllreduceAlgorithm algorithm, int per_host)
    : comm_(std::move(comm)),
      transport_(comm_),
      solver_(solver),
      compute_(compute),
      params_(std::move(params)),
      grads_(grads),
      begin_(begin),
      count_(count),
      label_(std::move(label)),
      device_sums_(device_sums),
      algorithm_(algorithm),
      schedule_(allreduce_schedule(algorithm, count, comm_.size(), comm_.rank(), per_host)),
      wire_(wire) {
  int64_t incoming = 1, largest = 1;
  for (const ScheduleStep& s : schedule_) {
    largest = std::max({largest, s.send_count, s.receive_count});
    if (std::max(s.send_count, s.receive_count) > std::numeric_limits<int>::max())
      throw CommError("all-reduce bucket of " + label_ + " has " + std::to_string(count_) +
                      " elements, more than one MPI call can move per step; use scheme ps for it");
    if (s.tag > comm_.max_tag()) throw CommError("all-reduce of " + label_ + " has more steps than MPI's tags allow");
    if (s.add) incoming = std::max(incoming, s.receive_count);
  }
  incoming_.resize(incoming);
  if (wire_ == Wire::bf16) {
    wire_out_.resize(largest);
    wire_in_.resize(largest);
  }
}

void AllreduceExchange::start(InFlight& in_flight) {
  step_ = 0;
  if (comm_.size() == 1) {
    update(in_flight);  // alone: the sum is the gradient
    return;
  }
  if (device_sums_) return device_sums_->sum_to_host(in_flight, begin_, count_, grads_, *this, kDeviceSummed);
  if (steps() == 0) return update(in_flight);
  post_step(in_flight);
}

void AllreduceExchange::post_step(InFlight& in_flight) {
  const ScheduleStep& s = schedule_[step_];
  step_pending_ = 0;
  // The send goes first: a receive already posted lets Open MPI's TCP
  // transport move the message by its put protocol, in one fragment during
  // which the connection carries nothing the other way (a ring posting
  // receives first ran at half the link's rate at P = 2).
  // On the bf16 wire a step's range goes rounded to 16 bits (dist/plan/wire.h).
  // The conversions go through ExchangeCompute: an emulated device, which
  // only waits and whose numbers nothing reads, leaves them out (device
  // work the simulator does not charge either), so that the emulated hosts'
  // shared cores do not pay for them.
  const bool bf16 = wire_ == Wire::bf16;
  if (s.send_to >= 0) {
    if (bf16) {
      compute_.encode_wire(grads_ + s.send_begin, wire_out_.data(), s.send_count);
      transport_.send(in_flight, wire_out_.data(), s.send_count, s.send_to, s.tag, *this, step_ * 2 + sent);
    } else {
      transport_.send(in_flight, grads_ + s.send_begin, s.send_count, s.send_to, s.tag, *this, step_ * 2 + sent);
    }
    ++step_pending_;
  }
  if (s.receive_from >= 0) {
    if (bf16)
      transport_.receive(in_flight, wire_in_.data(), s.receive_count, s.receive_from, s.tag, *this,
                         step_ * 2 + received);
    else
      transport_.receive(in_flight, s.add ? incoming_.data() : grads_ + s.receive_begin, s.receive_count,
                         s.receive_from, s.tag, *this, step_ * 2 + received);
    ++step_pending_;
  }
}

void AllreduceExchange::complete(int slot, InFlight& in_flight) {
  if (slot == kUpdated) return;
  if (slot == kSummed) {
    // The rank that completed a range's average keeps what the others will receive of it.
    const ScheduleStep& s = schedule_[step_];
    if (wire_ == Wire::bf16 && s.scale != 1.f) compute_.round_wire(grads_ + s.receive_begin, s.receive_count);
    return next_step(in_flight);
  }
  if (slot == kDeviceSummed) {
    const float scale = 1.f / static_cast<float>(comm_.size());
    for (int64_t i = 0; i < count_; ++i) grads_[i] *= scale;
    return update(in_flight);
  }
  if (--step_pending_ == 0) step_over(in_flight);
}

void AllreduceExchange::step_over(InFlight& in_flight) {
  const ScheduleStep& s = schedule_[step_];
  if (wire_ == Wire::bf16 && s.receive_from >= 0)
    compute_.decode_wire(wire_in_.data(), s.add ? incoming_.data() : grads_ + s.receive_begin, s.receive_count);
  if (!s.add) return next_step(in_flight);  // received in place, or only sent
  compute_.add(grads_ + s.receive_begin, incoming_.data(), s.receive_count, s.scale, {in_flight, *this, kSummed});
}

void AllreduceExchange::next_step(InFlight& in_flight) {
  if (++step_ < steps()) return post_step(in_flight);
  update(in_flight);
}

void AllreduceExchange::update(InFlight& in_flight) { compute_.update(solver_, params_, {in_flight, *this, kUpdated}); }

std::string AllreduceExchange::describe(int slot) const {
  if (slot == kSummed) return "the sum of a chunk of " + label_;
  if (slot == kUpdated) return "the update of " + label_;
  if (slot == kDeviceSummed) return "the NCCL all-reduce of " + label_ + " (a collective: a rank that never joins it stalls every other)";
  const int step = slot / 2;
  const ScheduleStep& s = schedule_[step];
  const std::string what = "step " + std::to_string(step + 1) + " of " + std::to_string(steps()) + " of the " +
                           algorithm_name(algorithm_) + " all-reduce of " + label_ + " (";
  if (slot % 2 == received) return what + "the chunk from rank " + std::to_string(s.receive_from) + ")";
  return what + "rank " + std::to_string(s.send_to) + " to take this rank's chunk)";
}

}  // namespace poseidon::dist
