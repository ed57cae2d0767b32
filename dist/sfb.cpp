// Sufficient-factor broadcasting: all-gather the factors, rebuild the gradient with one GEMM.
#include "dist/sfb.h"

#include <cstring>
#include <limits>

#include "core/math.h"

namespace poseidon::dist {

SfbExchange::SfbExchange(const Comm& comm, Solver& solver, Param& weight, Param* bias, const Tensor& input,
                         const Tensor& output_grad, std::string label, RebuildGemm rebuild_gemm)
    : comm_(comm),
      solver_(solver),
      weight_(weight),
      bias_(bias),
      input_(input),
      output_grad_(output_grad),
      label_(std::move(label)),
      rebuild_gemm_(std::move(rebuild_gemm)) {
  POSEIDON_CHECK(weight_.shape.size() == 2) << weight_.name << " is not a matrix";
  m_ = weight_.shape[0];
  n_ = weight_.shape[1];
  k_ = output_grad_.dim(0);
  POSEIDON_CHECK(output_grad_.numel() == k_ * m_ && input_.numel() == k_ * n_)
      << label_ << ": factors of shape " << shape_str(output_grad_.shape()) << " and " << shape_str(input_.shape())
      << " do not fit the weight " << shape_str(weight_.shape);
  const int64_t p = comm_.size();
  if (p * k_ * std::max(m_, n_) > std::numeric_limits<int>::max())
    throw CommError("the factors of " + label_ + " are more than one MPI call can move; use scheme ps for it");
  my_inputs_.resize(k_ * n_);
  my_output_grads_.resize(k_ * m_);
  all_inputs_.resize(p * k_ * n_);
  all_output_grads_.resize(p * k_ * m_);
  weight_.grad_formed_elsewhere = true;
}

void SfbExchange::capture() {
  // Copied now: the next forward overwrites the input blob before this layer's gate.
  POSEIDON_CHECK(input_.numel() == k_ * n_) << label_ << ": the batch changed under sufficient-factor broadcasting";
  std::memcpy(my_inputs_.data(), input_.data(), my_inputs_.size() * sizeof(float));
  std::memcpy(my_output_grads_.data(), output_grad_.data(), my_output_grads_.size() * sizeof(float));
}

void SfbExchange::start(Requests& requests) {
  const int64_t others = comm_.size() - 1;
  MPI_Request req;
  // Two collectives on this layer's own communicator, always in this order.
  POSEIDON_MPI(MPI_Iallgather(my_inputs_.data(), static_cast<int>(k_ * n_), MPI_FLOAT, all_inputs_.data(),
                              static_cast<int>(k_ * n_), MPI_FLOAT, comm_.handle(), &req));
  requests.post(req, *this, gather_inputs, others * k_ * n_ * 4, others * k_ * n_ * 4);
  POSEIDON_MPI(MPI_Iallgather(my_output_grads_.data(), static_cast<int>(k_ * m_), MPI_FLOAT, all_output_grads_.data(),
                              static_cast<int>(k_ * m_), MPI_FLOAT, comm_.handle(), &req));
  requests.post(req, *this, gather_output_grads, others * k_ * m_ * 4, others * k_ * m_ * 4);
}

void SfbExchange::complete(int slot, Requests& requests) {
  if (slot == rebuilt || in_flight() > 0) return;  // over, or the other all-gather is still running
  const int64_t rows = comm_.size() * k_;
  if (const DeviceCosts* device = requests.emulated()) {
    const int64_t params = m_ * n_ + (bias_ ? m_ : 0);
    return requests.post_device(device->rebuild_s(m_, n_, rows, bias_ != nullptr) + device->update_s(params), *this,
                                rebuilt);
  }
  const float scale = 1.f / static_cast<float>(comm_.size());
  if (rebuild_gemm_)
    rebuild_gemm_(true, false, m_, n_, rows, scale, all_output_grads_.data(), all_inputs_.data(), 0.f,
                  weight_.grad.data());
  else
    gemm(true, false, m_, n_, rows, scale, all_output_grads_.data(), all_inputs_.data(), 0.f, weight_.grad.data());
  traced_update(weight_.name, [&] { solver_.update(weight_); });
  if (!bias_) return;
  float* db = bias_->grad.data();
  std::fill(db, db + m_, 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* u = all_output_grads_.data() + r * m_;
    for (int64_t o = 0; o < m_; ++o) db[o] += u[o];
  }
  for (int64_t o = 0; o < m_; ++o) db[o] *= scale;
  traced_update(bias_->name, [&] { solver_.update(*bias_); });
}

std::string SfbExchange::describe(int slot) const {
  if (slot == rebuilt) return "the emulated rebuild of " + label_;
  return std::string(slot == gather_inputs ? "the all-gather of inputs" : "the all-gather of output gradients") +
         " of " + label_ + " (a collective: a rank that never joins it stalls every other)";
}

}  // namespace poseidon::dist
