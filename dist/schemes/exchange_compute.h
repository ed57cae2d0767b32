// ExchangeCompute: the arithmetic an exchange does between its transfers:
// a ring step's sum, a parameter-server owner's sum of the pushes and its
// block update, SFB's rebuild of a gradient from the gathered factors, and
// the solver update of what arrived. HostCompute does it on this host (with
// SFB's GEMM handed to a GPU where one is given); emulated compute
// (dist/schemes/emulated_compute.h) lets a profiled device's time pass instead.
// Either way the exchange hears that the work is over through its
// complete(slot), so no exchange knows which one it runs on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/solver.h"
#include "dist/plan/wire.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/timeline.h"

namespace poseidon::dist {

// A row-major GEMM c = alpha op(a) op(b) + beta c over host buffers, as
// core/math.h's gemm: (trans_a, trans_b, m, n, k, alpha, a, b, beta, c).
using RebuildGemm =
    std::function<void(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*)>;

// Where the end of a piece of work is reported: owner.complete(slot, in_flight).
struct WorkDone {
  InFlight& in_flight;
  Exchange& owner;
  int slot;
  void operator()() const { owner.complete(slot, in_flight); }
};

// SFB's factors, gathered in rank order: U [rows, m] (output gradients) and
// V [rows, n] (inputs).
struct Factors {
  const float* output_grads;
  const float* inputs;
  int64_t rows, m, n;
};

class ExchangeCompute {
 public:
  virtual ~ExchangeCompute() = default;
  // into[i] = (into[i] + other[i]) * scale for n elements.
  virtual void add(float* into, const float* other, int64_t n, float scale, const WorkDone& done) = 0;
  // A parameter-server block: the mean of `parts` (n floats each, summed in
  // the order given) is the gradient with which the solver updates `value`
  // with the block's `state` (as Solver::update_block takes it: null when the
  // solver keeps none) as its `step`th update; `sum` is n floats of room.
  virtual void update_block(Solver& solver, const Param& param, float* value, const std::vector<const float*>& parts,
                            float* sum, float* state, int64_t step, int64_t n, const WorkDone& done) = 0;
  // The solver update of each of `params` with its own gradient.
  virtual void update(Solver& solver, const std::vector<Param*>& params, const WorkDone& done) = 0;
  // SFB: weight.grad = U^T V / ranks and bias.grad (bias may be null) = the
  // column sums of U / ranks, then the solver update of both.
  virtual void rebuild(Solver& solver, const Factors& factors, int ranks, Param& weight, Param* bias,
                       const WorkDone& done) = 0;
  // The bf16 wire's conversions (dist/plan/wire.h) of what the exchanges
  // send and receive, and how many buffers receive the messages of
  // `senders` ranks. An emulated device only waits and nothing reads the
  // numbers: it leaves the conversions out, and one buffer takes every
  // sender's message, so that eight ranks of a large model fit in memory.
  virtual void encode_wire(const float* from, uint16_t* to, int64_t n) { encode_bf16(from, to, n); }
  virtual void decode_wire(const uint16_t* from, float* to, int64_t n) { decode_bf16(from, to, n); }
  virtual void round_wire(float* x, int64_t n) { round_to_bf16(x, n); }
  // `x` as the receivers of its bf16 see it: rounded into `copy`, which it returns.
  virtual const float* wire_rounded(const float* x, std::vector<float>& copy, int64_t n) {
    copy.assign(x, x + n);
    round_to_bf16(copy.data(), n);
    return copy.data();
  }
  virtual int receive_buffers(int senders) const { return senders; }

  // Low-rank compression's arithmetic (dist/schemes/lowrank.h): `work` computes it
  // on this host; it is worth a GEMM of an n x m matrix by `columns`
  // columns, which is what an emulated device waits instead.
  virtual void compress(const std::function<void()>& work, int64_t n, int64_t m, int64_t columns,
                        const WorkDone& done) {
    work();
    done();
  }
};

// The arithmetic on this host; SFB's GEMM through `rebuild_gemm` where given
// (a GPU's, for a net staged from one: dist/gpu/gpu_gemm.h).
class HostCompute : public ExchangeCompute {
 public:
  explicit HostCompute(RebuildGemm rebuild_gemm = {}) : rebuild_gemm_(std::move(rebuild_gemm)) {}
  void add(float* into, const float* other, int64_t n, float scale, const WorkDone& done) override;
  void update_block(Solver& solver, const Param& param, float* value, const std::vector<const float*>& parts,
                    float* sum, float* state, int64_t step, int64_t n, const WorkDone& done) override;
  void update(Solver& solver, const std::vector<Param*>& params, const WorkDone& done) override;
  void rebuild(Solver& solver, const Factors& factors, int ranks, Param& weight, Param* bias,
               const WorkDone& done) override;

 private:
  RebuildGemm rebuild_gemm_;
};

// Hands every piece of work to `inner`; with a timeline set, records each
// update (a PS block's, a bucket's, an SFB layer's rebuild and update) on
// its update lane. The Scheduler's exchanges run through one of these.
class TracingCompute : public ExchangeCompute {
 public:
  explicit TracingCompute(std::shared_ptr<ExchangeCompute> inner) : inner_(std::move(inner)) {}
  // Set before training; null: nothing is recorded.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

  void add(float* into, const float* other, int64_t n, float scale, const WorkDone& done) override {
    inner_->add(into, other, n, scale, done);
  }
  void update_block(Solver& solver, const Param& param, float* value, const std::vector<const float*>& parts,
                    float* sum, float* state, int64_t step, int64_t n, const WorkDone& done) override;
  void update(Solver& solver, const std::vector<Param*>& params, const WorkDone& done) override;
  void rebuild(Solver& solver, const Factors& factors, int ranks, Param& weight, Param* bias,
               const WorkDone& done) override;
  void encode_wire(const float* from, uint16_t* to, int64_t n) override { inner_->encode_wire(from, to, n); }
  void decode_wire(const uint16_t* from, float* to, int64_t n) override { inner_->decode_wire(from, to, n); }
  void round_wire(float* x, int64_t n) override { inner_->round_wire(x, n); }
  const float* wire_rounded(const float* x, std::vector<float>& copy, int64_t n) override {
    return inner_->wire_rounded(x, copy, n);
  }
  int receive_buffers(int senders) const override { return inner_->receive_buffers(senders); }
  void compress(const std::function<void()>& work, int64_t n, int64_t m, int64_t columns,
                const WorkDone& done) override {
    traced("low-rank factors", [&] { inner_->compress(work, n, m, columns, done); });
  }

 private:
  // Runs `work`, recorded as "update <what>".
  void traced(const std::string& what, const std::function<void()>& work);

  std::shared_ptr<ExchangeCompute> inner_;
  std::atomic<Timeline*> timeline_ = nullptr;
};

}  // namespace poseidon::dist
