// Low-rank compression with error feedback: the arithmetic and the exchange.
#include "dist/schemes/lowrank.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/checkpoint.h"
#include "core/math.h"

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

void lowrank_project(LowRankState& s, const float* grad, float* m, float* p) {
  const int64_t n = s.rows * s.cols;
  for (int64_t i = 0; i < n; ++i) m[i] = grad[i] + s.error[i];
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

void lowrank_back_project(const LowRankState& s, const float* m, const float* p, float* q_local) {
  gemm(true, false, s.cols, s.rank, s.rows, 1.f, m, p, 0.f, q_local);
}

void lowrank_decompress(LowRankState& s, const float* m, const float* p, float* grad) {
  gemm(false, true, s.rows, s.cols, s.rank, 1.f, p, s.q.data(), 0.f, grad);
  const int64_t n = s.rows * s.cols;
  for (int64_t i = 0; i < n; ++i) s.error[i] = m[i] - grad[i];
}

void sum_in_order(const std::vector<const float*>& parts, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = parts[0][i];
  for (size_t r = 1; r < parts.size(); ++r)
    for (int64_t i = 0; i < n; ++i) out[i] += parts[r][i];
  if (scale != 1.f)
    for (int64_t i = 0; i < n; ++i) out[i] *= scale;
}

LowRankExchange::LowRankExchange(Comm comm, Solver& solver, ExchangeCompute& compute, std::vector<Param*> params,
                                 int rank, std::string label)
    : comm_(std::move(comm)), solver_(solver), compute_(compute), params_(std::move(params)), label_(std::move(label)) {
  const Param& w = *params_[0];
  const int64_t rows = w.shape[0], cols = w.value.numel() / rows;
  state_ = initial_lowrank_state(w.name, rows, cols, rank);
  for (size_t i = 1; i < params_.size(); ++i) others_ += params_[i]->value.numel();
  m_.resize(rows * cols);
  p_.resize(rows * rank);
  const int64_t largest = std::max(rows * rank + others_, cols * rank);
  send_.resize(largest);
  gathered_.resize(largest * comm_.size());
}

void LowRankExchange::start(InFlight& in_flight) {
  compute_.compress(
      [this] {
        lowrank_project(state_, params_[0]->grad.data(), m_.data(), send_.data());
        float* at = send_.data() + state_.rows * state_.rank;
        for (size_t i = 1; i < params_.size(); ++i) {
          std::copy(params_[i]->grad.data(), params_[i]->grad.data() + params_[i]->value.numel(), at);
          at += params_[i]->value.numel();
        }
      },
      state_.rows, state_.cols, state_.rank, {in_flight, *this, projected});
}

void LowRankExchange::complete(int slot, InFlight& in_flight) {
  const int ranks = comm_.size();
  const int64_t p_count = state_.rows * state_.rank, q_count = state_.cols * state_.rank;
  MPI_Request req;
  switch (slot) {
    case projected: {
      const int n = static_cast<int>(p_count + others_);
      POSEIDON_MPI(MPI_Iallgather(send_.data(), n, MPI_FLOAT, gathered_.data(), n, MPI_FLOAT, comm_.handle(), &req));
      in_flight.post(req, *this, gathered_p, int64_t{n} * 4 * (ranks - 1), int64_t{n} * 4 * (ranks - 1));
      return;
    }
    case gathered_p:
      return compute_.compress(
          [this, ranks, p_count] {
            const int64_t stride = p_count + others_;
            std::vector<const float*> parts(ranks);
            for (int r = 0; r < ranks; ++r) parts[r] = gathered_.data() + r * stride;
            sum_in_order(parts, p_count, 1.f, p_.data());
            orthogonalise_columns(p_.data(), state_.rows, state_.rank);
            int64_t offset = p_count;
            for (size_t i = 1; i < params_.size(); ++i) {
              for (int r = 0; r < ranks; ++r) parts[r] = gathered_.data() + r * stride + offset;
              const int64_t n = params_[i]->value.numel();
              sum_in_order(parts, n, 1.f / static_cast<float>(ranks), params_[i]->grad.data());
              offset += n;
            }
            lowrank_back_project(state_, m_.data(), p_.data(), send_.data());
          },
          state_.rows, state_.cols, state_.rank, {in_flight, *this, back_projected});
    case back_projected: {
      const int n = static_cast<int>(q_count);
      POSEIDON_MPI(MPI_Iallgather(send_.data(), n, MPI_FLOAT, gathered_.data(), n, MPI_FLOAT, comm_.handle(), &req));
      in_flight.post(req, *this, gathered_q, int64_t{n} * 4 * (ranks - 1), int64_t{n} * 4 * (ranks - 1));
      return;
    }
    case gathered_q:
      return compute_.compress(
          [this, ranks, q_count] {
            std::vector<const float*> parts(ranks);
            for (int r = 0; r < ranks; ++r) parts[r] = gathered_.data() + r * q_count;
            sum_in_order(parts, q_count, 1.f / static_cast<float>(ranks), state_.q.data());
            lowrank_decompress(state_, m_.data(), p_.data(), params_[0]->grad.data());
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

void LowRankExchange::import_state(const std::map<std::string, DeferredTensor>& saved) {
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
      POSEIDON_MPI(MPI_Send(state_.error.data() + at, static_cast<int>(std::min(kStreamPiece, n - at)), MPI_FLOAT,
                            root, 0, comm_.handle()));
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
      POSEIDON_MPI(MPI_Recv(piece.data(), count, MPI_FLOAT, r, 0, comm_.handle(), MPI_STATUS_IGNORE));
      if (write) write(piece.data(), static_cast<size_t>(count));
    }
  }
}

std::string LowRankExchange::describe(int slot) const {
  switch (slot) {
    case gathered_p:
      return "the gather of the P factors of " + label_ +
             " (a collective: a rank that never joins it stalls every other)";
    case gathered_q:
      return "the gather of the Q factors of " + label_ +
             " (a collective: a rank that never joins it stalls every other)";
    case updated:
      return "the update of " + label_;
    default:
      return "the low-rank arithmetic of " + label_;
  }
}

}  // namespace poseidon::dist
