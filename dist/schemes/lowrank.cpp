// Low-rank compression with error feedback: the arithmetic and the exchange.
#include "dist/schemes/lowrank.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/checkpoint.h"
#include "core/math.h"
#include "dist/schemes/exchange_registry.h"

namespace poseidon::dist {

LowRankState initial_lowrank_state(const std::string& name, int64_t rows, int64_t cols, int rank) {
  LowRankState s;
  s.rows = rows;
  s.cols = cols;
  s.rank = rank;
  s.error.assign(rows * cols, 0.f);
  s.q.resize(cols * rank);
  uint32_t seed = 2166136261u;
  for (unsigned char c : name) seed = (seed ^ c) * 16777619u;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (float& v : s.q) v = normal(rng);
  return s;
}

void lowrank_project(LowRankState& s, const float* grad, float* p) {
  const int64_t n = s.rows * s.cols;
  float* m = s.error.data();
  for (int64_t i = 0; i < n; ++i) m[i] = grad[i] + m[i];
  gemm(false, false, s.rows, s.rank, s.cols, 1.f, m, s.q.data(), 0.f, p);
}

void orthogonalise_columns(float* p, int64_t rows, int rank) {
  for (int j = 0; j < rank; ++j) {
    for (int k = 0; k < j; ++k) {
      float dot = 0.f;
      for (int64_t i = 0; i < rows; ++i) dot += p[i * rank + j] * p[i * rank + k];
      for (int64_t i = 0; i < rows; ++i) p[i * rank + j] -= dot * p[i * rank + k];
    }
    float norm = 0.f;
    for (int64_t i = 0; i < rows; ++i) norm += p[i * rank + j] * p[i * rank + j];
    norm = std::sqrt(norm);
    const float inv = norm > 0.f ? 1.f / norm : 0.f;
    for (int64_t i = 0; i < rows; ++i) p[i * rank + j] *= inv;
  }
}

void lowrank_back_project(const LowRankState& s, const float* p, float* q_local) {
  gemm(true, false, s.cols, s.rank, s.rows, 1.f, s.error.data(), p, 0.f, q_local);
}

void lowrank_decompress(LowRankState& s, const float* p, float* grad) {
  gemm(false, true, s.rows, s.cols, s.rank, 1.f, p, s.q.data(), 0.f, grad);
  const int64_t n = s.rows * s.cols;
  float* m = s.error.data();
  for (int64_t i = 0; i < n; ++i) m[i] = m[i] - grad[i];
}

namespace {
std::unique_ptr<Exchange> make_lowrank(const ExchangeSetup& setup, const SyncGroup& group) {
  std::vector<Param*> params;
  for (size_t i : group.params) params.push_back(setup.plan.params[i].param);
  return std::make_unique<LowRankExchange>(setup.comm.duplicate(), setup.solver, setup.compute, std::move(params),
                                           group.rank, group.label, group.algorithm, setup.ranks_per_host);
}
}  // namespace

POSEIDON_REGISTER_EXCHANGE(Scheme::lowrank, make_lowrank);

LowRankExchange::LowRankExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params,
                                 int rank, std::string label, AllreduceAlgorithm algorithm, int per_host)
    : comm_(std::move(comm)),
      transport_(comm_),
      solver_(solver),
      compute_(compute),
      params_(std::move(params)),
      label_(std::move(label)),
      algorithm_(algorithm),
      per_host_(per_host) {
  const Param& w = *params_[0];
  const int64_t rows = w.shape[0], cols = w.value.numel() / rows;
  state_ = initial_lowrank_state(w.name, rows, cols, rank);
  for (size_t i = 1; i < params_.size(); ++i) others_ += params_[i]->value.numel();
  p_.resize(rows * rank);
  const int64_t largest = std::max(rows * rank + others_, cols * rank);
  send_.resize(largest);
  incoming_.resize(largest);
  if (largest > std::numeric_limits<int>::max())
    throw CommError("the low-rank factors of " + label_ + " are more than one MPI call can move");
}

void LowRankExchange::start(InFlight& in_flight) {
  compute_.compress(
      [this] {
        lowrank_project(state_, params_[0]->grad.data(), send_.data());
        float* at = send_.data() + state_.rows * state_.rank;
        for (size_t i = 1; i < params_.size(); ++i) {
          std::copy(params_[i]->grad.data(), params_[i]->grad.data() + params_[i]->value.numel(), at);
          at += params_[i]->value.numel();
        }
      },
      state_.rows, state_.cols, state_.rank, {in_flight, *this, projected});
}

void LowRankExchange::allreduce(float* data, int64_t count, int then, InFlight& in_flight) {
  reduced_ = data;
  then_ = then;
  step_ = 0;
  schedule_ = allreduce_schedule(algorithm_, count, comm_.size(), comm_.rank(), per_host_);
  if (schedule_.empty()) return complete(then_, in_flight);  // alone: the sum is the mean
  post_step(in_flight);
}

void LowRankExchange::post_step(InFlight& in_flight) {
  const ScheduleStep& s = schedule_[step_];
  step_pending_ = 0;
  // The send first, as AllreduceExchange posts it (dist/schemes/allreduce.cpp says why).
  if (s.send_to >= 0) {
    transport_.send(in_flight, reduced_ + s.send_begin, s.send_count, s.send_to, s.tag, *this, kSteps + 2 * step_ + 1);
    ++step_pending_;
  }
  if (s.receive_from >= 0) {
    float* into = s.add ? incoming_.data() : reduced_ + s.receive_begin;
    transport_.receive(in_flight, into, s.receive_count, s.receive_from, s.tag, *this, kSteps + 2 * step_);
    ++step_pending_;
  }
}

void LowRankExchange::step_over(InFlight& in_flight) {
  const ScheduleStep& s = schedule_[step_];
  if (s.add) return compute_.add(reduced_ + s.receive_begin, incoming_.data(), s.receive_count, s.scale,
                                 {in_flight, *this, summed});
  complete(summed, in_flight);
}

void LowRankExchange::complete(int slot, InFlight& in_flight) {
  if (slot >= kSteps) {
    if (--step_pending_ == 0) step_over(in_flight);
    return;
  }
  const int64_t p_count = state_.rows * state_.rank, q_count = state_.cols * state_.rank;
  switch (slot) {
    case summed:
      if (++step_ < static_cast<int>(schedule_.size())) return post_step(in_flight);
      return complete(then_, in_flight);
    case projected:
      return allreduce(send_.data(), p_count + others_, reduced_p, in_flight);
    case reduced_p:
      return compute_.compress(
          [this, p_count] {
            std::copy(send_.data(), send_.data() + p_count, p_.data());
            orthogonalise_columns(p_.data(), state_.rows, state_.rank);
            const float* at = send_.data() + p_count;
            for (size_t i = 1; i < params_.size(); ++i) {
              std::copy(at, at + params_[i]->value.numel(), params_[i]->grad.data());
              at += params_[i]->value.numel();
            }
            lowrank_back_project(state_, p_.data(), send_.data());
          },
          state_.rows, state_.cols, state_.rank, {in_flight, *this, back_projected});
    case back_projected:
      return allreduce(send_.data(), q_count, reduced_q, in_flight);
    case reduced_q:
      return compute_.compress(
          [this, q_count] {
            std::copy(send_.data(), send_.data() + q_count, state_.q.data());
            lowrank_decompress(state_, p_.data(), params_[0]->grad.data());
          },
          state_.rows, state_.cols, state_.rank, {in_flight, *this, decompressed});
    case decompressed:
      return compute_.update(solver_, params_, {in_flight, *this, updated});
    default:
      return;
  }
}

std::string LowRankExchange::q_name() const { return kCompressionPrefix + params_[0]->name + ".lowrank_q"; }
std::string LowRankExchange::error_name() const { return kCompressionPrefix + params_[0]->name + ".lowrank_error"; }

Shape LowRankExchange::error_shape() const { return {comm_.size(), state_.rows, state_.cols}; }

StreamedTensor LowRankExchange::q_entry() const {
  return {q_name(), Shape{state_.cols, state_.rank},
          [this](const StreamedTensor::Writer& write) { write(state_.q.data(), state_.q.size()); }};
}

std::vector<ExchangeStateEntry> LowRankExchange::state_entries() {
  return {{q_name(), Shape{state_.cols, state_.rank}, false,
           [this](int, const StreamedTensor::Writer& write) { q_entry().produce(write); }},
          {error_name(), error_shape(), true,
           [this](int root, const StreamedTensor::Writer& write) { stream_error(root, write); }}};
}

void LowRankExchange::restore(Solver&, const std::map<std::string, DeferredTensor>& saved) {
  const auto q = saved.find(q_name()), error = saved.find(error_name());
  if (q == saved.end() && error == saved.end()) return;
  const Shape q_shape{state_.cols, state_.rank};
  if (q == saved.end() || error == saved.end() || q->second.shape() != q_shape ||
      error->second.shape() != error_shape())
    throw Error("the checkpoint's low-rank state of " + params_[0]->name + " does not fit this run (expected " +
                q_name() + " " + shape_str(q_shape) + " and " + error_name() + " " + shape_str(error_shape()) +
                ": rank dist.lowrank_rank and " + std::to_string(comm_.size()) + " ranks)");
  q->second.read(0, static_cast<int64_t>(state_.q.size()), state_.q.data());
  const int64_t n = static_cast<int64_t>(state_.error.size());
  error->second.read(comm_.rank() * n, n, state_.error.data());
}

namespace {
// The most floats one message of stream_error carries: bounds the root's
// buffer, and keeps MPI's int counts in range for any layer.
constexpr int64_t kStreamPiece = int64_t{1} << 22;
}  // namespace

void LowRankExchange::stream_error(int root, const StreamedTensor::Writer& write) {
  const int64_t n = static_cast<int64_t>(state_.error.size());
  if (comm_.rank() != root) {
    for (int64_t at = 0; at < n; at += kStreamPiece)
      transport_.send_now(state_.error.data() + at, std::min(kStreamPiece, n - at), root, 0);
    return;
  }
  std::vector<float> piece;
  for (int r = 0; r < comm_.size(); ++r) {
    if (r == root) {
      if (write) write(state_.error.data(), state_.error.size());
      continue;
    }
    piece.resize(static_cast<size_t>(std::min(kStreamPiece, n)));
    for (int64_t at = 0; at < n; at += kStreamPiece) {
      const int count = static_cast<int>(std::min(kStreamPiece, n - at));
      transport_.receive_now(piece.data(), count, r, 0);
      if (write) write(piece.data(), static_cast<size_t>(count));
    }
  }
}

std::string LowRankExchange::describe(int slot) const {
  if (slot >= kSteps) {
    const int step = (slot - kSteps) / 2;
    const ScheduleStep& s = schedule_[step];
    const std::string what = "step " + std::to_string(step + 1) + " of " + std::to_string(schedule_.size()) +
                             " of the all-reduce of the " + (then_ == reduced_p ? "P" : "Q") + " factors of " +
                             label_ + " (";
    if ((slot - kSteps) % 2 == 0) return what + "the chunk from rank " + std::to_string(s.receive_from) + ")";
    return what + "rank " + std::to_string(s.send_to) + " to take this rank's chunk)";
  }
  switch (slot) {
    case summed:
      return "the sum of a chunk of the factors of " + label_;
    case updated:
      return "the update of " + label_;
    default:
      return "the low-rank arithmetic of " + label_;
  }
}

}  // namespace poseidon::dist
