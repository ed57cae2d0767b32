// SfbExchange: sufficient-factor broadcasting for one fully connected layer.
// The weight gradient of an FC layer (M outputs, N inputs) over a batch of K
// is dW = dY^T X, a sum of K outer products of the output gradient dY [K, M]
// and the input X [K, N]. Instead of the M*N numbers of dW, every rank
// all-gathers the K*(M+N) numbers of its factors, and every rank rebuilds
// the averaged gradient of all P*K examples with one GEMM:
//   dW = U^T V / P,  db = column sums of U / P,
// with U [P*K, M] and V [P*K, N] the gathered factors in rank order. Each
// rank then applies the same Solver update, so replicas stay identical (as
// long as every rank runs the same GEMM kernels). Backward skips computing
// dW locally: the exchange names the weight's sources (the input and output
// gradient blobs), which the scheduler passes on as
// GradSink::gradient_sources, so the layer's LayerIO::writes_param_grad is
// false for it. The factors move by all-gathers on the layer's own
// communicator (dist/runtime/host_transport.h). The rebuild GEMM runs where
// `rebuild_gemm` says (a GPU's for a GPU net: dist/gpu/gpu_gemm.h), on the host
// without one. Under emulated compute the rebuild and the update are a wait
// on the emulated device instead.
// A layer computing in bf16 (core/precision.h) reads its factors rounded to
// bfloat16 (layers/fc_dnnl.h); their snapshot here is rounded so too, and
// the float32 rebuild of those exact values sums the same products as the
// layer would.
#pragma once

#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/host_transport.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

class SfbExchange : public Exchange {
 public:
  // `input` and `output_grad` are the layer's input value and output gradient
  // blobs (read when the layer's gradients are reported), `sources` their
  // names; `bias` may be null; `precision` is the layer's.
  SfbExchange(Comm comm, Solver& solver, ExchangeCompute& compute, Param& weight, Param* bias, const Tensor& input,
              const Tensor& output_grad, std::vector<BlobPart> sources, std::string label,
              Precision precision = Precision::fp32);
  void snapshot_operands() override;
  const std::vector<BlobPart>* gradient_sources(const Param& param) const override {
    return &param == &weight_ ? &sources_ : nullptr;
  }
  void start(InFlight& in_flight) override;
  void complete(int slot, InFlight& in_flight) override;
  std::string describe(int slot) const override;

 private:
  enum Slot { gather_inputs = 0, gather_output_grads = 1, rebuilt = 2 };

  Comm comm_;
  HostTransport transport_;  // over comm_
  Solver& solver_;
  ExchangeCompute& compute_;
  Param& weight_;
  Param* bias_;
  const Tensor& input_;
  const Tensor& output_grad_;
  std::vector<BlobPart> sources_;
  std::string label_;
  Precision precision_;
  int64_t k_ = 0, m_ = 0, n_ = 0;
  std::vector<float> my_inputs_, my_output_grads_;    // this rank's factors: K x N, K x M
  std::vector<float> all_inputs_, all_output_grads_;  // everyone's, in rank order: P*K x N, P*K x M
};

}  // namespace poseidon::dist
