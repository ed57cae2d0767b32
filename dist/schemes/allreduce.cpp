// Bucket all-reduce as this rank's steps of the plan's algorithm, then the Solver update.
#include "dist/schemes/allreduce.h"

#include <algorithm>
#include <limits>

namespace poseidon::dist {

AllreduceExchange::AllreduceExchange(Comm comm, Solver& solver, ExchangeCompute& compute,
                                     std::vector<Param*> params, float* grads, int64_t count, std::string label,
                                     DeviceSum device_sum, Wire wire, AllreduceAlgorithm algorithm,
                                     int per_host)
    : comm_(std::move(comm)),
      solver_(solver),
      compute_(compute),
      params_(std::move(params)),
      grads_(grads),
      count_(count),
      label_(std::move(label)),
      device_sum_(std::move(device_sum)),
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
  if (device_sum_) return in_flight.post_polled(device_sum_(grads_, count_), *this, kDeviceSummed);
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
  const MPI_Datatype type = bf16 ? MPI_UINT16_T : MPI_FLOAT;
  const int64_t bytes = bf16 ? 2 : 4;
  MPI_Request req;
  if (s.send_to >= 0) {
    const void* out = grads_ + s.send_begin;
    if (bf16) {
      compute_.encode_wire(grads_ + s.send_begin, wire_out_.data(), s.send_count);
      out = wire_out_.data();
    }
    POSEIDON_MPI(MPI_Isend(out, static_cast<int>(s.send_count), type, s.send_to, s.tag, comm_.handle(), &req));
    in_flight.post(req, *this, step_ * 2 + sent, s.send_count * bytes, 0);
    ++step_pending_;
  }
  if (s.receive_from >= 0) {
    void* into = bf16 ? static_cast<void*>(wire_in_.data())
                      : static_cast<void*>(s.add ? incoming_.data() : grads_ + s.receive_begin);
    POSEIDON_MPI(
        MPI_Irecv(into, static_cast<int>(s.receive_count), type, s.receive_from, s.tag, comm_.handle(), &req));
    in_flight.post(req, *this, step_ * 2 + received, 0, s.receive_count * bytes);
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
