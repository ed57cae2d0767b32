// Sufficient-factor broadcasting: all-gather the factors, rebuild the gradient with one GEMM.
#include "dist/schemes/sfb.h"

#include <cstring>
#include <limits>
#include <utility>

#include "core/blob_types.h"
#include "dist/schemes/exchange_registry.h"

namespace poseidon::dist {

namespace {
std::unique_ptr<Exchange> make_sfb(const ExchangeSetup& setup, const SyncGroup& group) {
  const Layer& layer = setup.net.layer(setup.plan.params[group.params[0]].layer);
  Param& weight = *setup.plan.params[group.params[0]].param;
  Param* bias = group.params.size() > 1 ? setup.plan.params[group.params[1]].param : nullptr;
  const std::string& input = layer.inputs()[0];
  const std::string& output = layer.outputs()[0];
  return std::make_unique<SfbExchange>(setup.comm.duplicate(), setup.solver, setup.compute, weight, bias,
                                       setup.net.blob(input).value, setup.net.blob(output).grad,
                                       std::vector<BlobPart>{BlobPart{input, false}, BlobPart{output, true}},
                                       group.label, layer.precision());
}
}  // namespace

POSEIDON_REGISTER_EXCHANGE(Scheme::sfb, make_sfb);

SfbExchange::SfbExchange(Comm comm, Solver& solver, ExchangeCompute& compute, Param& weight, Param* bias,
                         const Tensor& input, const Tensor& output_grad, std::vector<BlobPart> sources,
                         std::string label, Precision precision)
    : comm_(std::move(comm)),
      transport_(comm_),
      solver_(solver),
      compute_(compute),
      weight_(weight),
      bias_(bias),
      input_(input),
      output_grad_(output_grad),
      sources_(std::move(sources)),
      label_(std::move(label)),
      precision_(precision) {
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
}

void SfbExchange::snapshot_operands() {
  // Copied now: the next forward overwrites the input blob before this layer's gate.
  POSEIDON_CHECK(input_.numel() == k_ * n_) << label_ << ": the batch changed under sufficient-factor broadcasting";
  // A bfloat16 blob (the fc's input and output gradient under bf16 on the
  // CPU, core/blob_types.h) widens exactly; a float32 one is rounded, as the
  // layer's own product reads it.
  for (auto [from, to] : {std::pair{&input_, &my_inputs_}, std::pair{&output_grad_, &my_output_grads_}}) {
    if (from->dtype() == DType::bf16)
      widen_bf16(from->bf16_data(), to->data(), static_cast<int64_t>(to->size()));
    else
      std::memcpy(to->data(), from->data(), to->size() * sizeof(float));
  }
  if (precision_ == Precision::bf16) {
    round_to_bf16(my_inputs_.data(), static_cast<int64_t>(my_inputs_.size()));
    round_to_bf16(my_output_grads_.data(), static_cast<int64_t>(my_output_grads_.size()));
  }
}

void SfbExchange::start(InFlight& in_flight) {
  // Two collectives on this layer's own communicator, always in this order.
  transport_.all_gather(in_flight, my_inputs_.data(), k_ * n_, all_inputs_.data(), *this, gather_inputs);
  transport_.all_gather(in_flight, my_output_grads_.data(), k_ * m_, all_output_grads_.data(), *this,
                        gather_output_grads);
}

void SfbExchange::complete(int slot, InFlight& in_flight) {
  if (slot == rebuilt || operations_in_flight() > 0) return;  // over, or the other all-gather is still running
  const Factors factors{all_output_grads_.data(), all_inputs_.data(), comm_.size() * k_, m_, n_};
  compute_.rebuild(solver_, factors, comm_.size(), weight_, bias_, {in_flight, *this, rebuilt});
}

std::string SfbExchange::describe(int slot) const {
  if (slot == rebuilt) return "the rebuild and update of " + label_;
  return std::string(slot == gather_inputs ? "the all-gather of inputs" : "the all-gather of output gradients") +
         " of " + label_ + " (a collective: a rank that never joins it stalls every other)";
}

}  // namespace poseidon::dist
