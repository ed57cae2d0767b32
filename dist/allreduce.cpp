// Bucket all-reduce as a ring (reduce-scatter, all-gather), then the Solver update.
#include "dist/allreduce.h"

#include <algorithm>
#include <limits>

namespace poseidon::dist {

AllreduceExchange::AllreduceExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params,
                                     float* grads, int64_t count, std::string label, DeviceSum device_sum, Wire wire)
    : comm_(std::move(comm)),
      solver_(solver),
      compute_(compute),
      params_(std::move(params)),
      grads_(grads),
      count_(count),
      label_(std::move(label)),
      device_sum_(std::move(device_sum)),
      wire_(wire) {
  const int p = comm_.size();
  if (count_ / p + 1 > std::numeric_limits<int>::max())
    throw CommError("all-reduce bucket of " + label_ + " has " + std::to_string(count_) +
                    " elements, more than one MPI call can move per rank; use scheme ps for it");
  int64_t at = 0;
  for (int c = 0; c < p; ++c) {
    begins_.push_back(at);
    counts_.push_back(count_ / p + (c < count_ % p ? 1 : 0));
    at += counts_.back();
  }
  incoming_.resize(std::max<int64_t>(1, counts_[0]));
  if (wire_ == Wire::bf16) {
    wire_out_.resize(incoming_.size());
    wire_in_.resize(incoming_.size());
  }
}

int AllreduceExchange::chunk_sent(int step) const {
  const int p = comm_.size(), r = comm_.rank();
  // Reduce-scatter step s sends chunk r - s; all-gather step t sends chunk r + 1 - t, the one completed last.
  const int s = step < p - 1 ? step : step - (p - 1) - 1;
  return ((r - s) % p + p) % p;
}

int AllreduceExchange::chunk_received(int step) const {
  const int p = comm_.size();
  return (chunk_sent(step) - 1 + p) % p;  // what the left neighbour sends
}

void AllreduceExchange::start(InFlight& in_flight) {
  step_ = 0;
  if (steps() == 0) {
    update(in_flight);  // alone: the sum is the gradient
    return;
  }
  if (device_sum_) return in_flight.post_polled(device_sum_(grads_, count_), *this, kDeviceSummed);
  post_step(in_flight);
}

void AllreduceExchange::post_step(InFlight& in_flight) {
  const int p = comm_.size(), r = comm_.rank();
  const int left = (r - 1 + p) % p, right = (r + 1) % p;
  const bool reducing = step_ < p - 1;
  const int in = chunk_received(step_), out = chunk_sent(step_);
  float* into = reducing ? incoming_.data() : grads_ + begins_[in];
  // The send goes first: a receive already posted lets Open MPI's TCP
  // transport move the message by its put protocol, in one fragment during
  // which the connection carries nothing the other way (a ring posting
  // receives first ran at half the link's rate at P = 2).
  MPI_Request req;
  if (wire_ == Wire::bf16) {
    encode_bf16(grads_ + begins_[out], wire_out_.data(), counts_[out]);
    POSEIDON_MPI(
        MPI_Isend(wire_out_.data(), static_cast<int>(counts_[out]), MPI_UINT16_T, right, step_, comm_.handle(), &req));
    in_flight.post(req, *this, step_ * 2 + sent, counts_[out] * 2, 0);
    POSEIDON_MPI(
        MPI_Irecv(wire_in_.data(), static_cast<int>(counts_[in]), MPI_UINT16_T, left, step_, comm_.handle(), &req));
    in_flight.post(req, *this, step_ * 2 + received, 0, counts_[in] * 2);
    step_pending_ = 2;
    return;
  }
  POSEIDON_MPI(
      MPI_Isend(grads_ + begins_[out], static_cast<int>(counts_[out]), MPI_FLOAT, right, step_, comm_.handle(), &req));
  in_flight.post(req, *this, step_ * 2 + sent, counts_[out] * 4, 0);
  POSEIDON_MPI(MPI_Irecv(into, static_cast<int>(counts_[in]), MPI_FLOAT, left, step_, comm_.handle(), &req));
  in_flight.post(req, *this, step_ * 2 + received, 0, counts_[in] * 4);
  step_pending_ = 2;
}

void AllreduceExchange::complete(int slot, InFlight& in_flight) {
  if (slot == kUpdated) return;
  if (slot == kSummed) {
    // The rank that completed a chunk's average keeps what the others will receive of it.
    if (wire_ == Wire::bf16 && step_ == comm_.size() - 2) {
      const int c = chunk_received(step_);
      round_to_bf16(grads_ + begins_[c], counts_[c]);
    }
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
  const int p = comm_.size();
  const int c = chunk_received(step_);
  if (wire_ == Wire::bf16)
    decode_bf16(wire_in_.data(), step_ >= p - 1 ? grads_ + begins_[c] : incoming_.data(), counts_[c]);
  if (step_ >= p - 1) return next_step(in_flight);  // all-gather: the chunk arrived in place
  // The chunk's last contribution is averaged as well.
  const float scale = step_ < p - 2 ? 1.f : 1.f / static_cast<float>(p);
  compute_.add(grads_ + begins_[c], incoming_.data(), counts_[c], scale, {in_flight, *this, kSummed});
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
  const int p = comm_.size(), r = comm_.rank();
  const int step = slot / 2;
  const std::string what = "step " + std::to_string(step + 1) + " of " + std::to_string(steps()) +
                           " of the ring all-reduce of " + label_ + " (";
  if (slot % 2 == received) return what + "the chunk from rank " + std::to_string((r - 1 + p) % p) + ")";
  return what + "rank " + std::to_string((r + 1) % p) + " to take this rank's chunk)";
}

}  // namespace poseidon::dist
