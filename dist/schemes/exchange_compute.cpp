// The exchanges' arithmetic on this host (see exchange_compute.h).
#include "dist/schemes/exchange_compute.h"

#include <algorithm>
#include <cstring>

#include "core/math.h"

namespace poseidon::dist {

void HostCompute::add(float* into, const float* other, int64_t n, float scale, const WorkDone& done) {
  if (scale == 1.f)
    for (int64_t i = 0; i < n; ++i) into[i] += other[i];
  else
    for (int64_t i = 0; i < n; ++i) into[i] = (into[i] + other[i]) * scale;
  done();
}

void HostCompute::update_block(Solver& solver, const Param& param, float* value,
                               const std::vector<const float*>& parts, float* sum, float* state, int64_t step,
                               int64_t n, const WorkDone& done) {
  // In the order given (rank order), whoever's push arrived first: the same sum on every run.
  std::memcpy(sum, parts[0], n * sizeof(float));
  for (size_t r = 1; r < parts.size(); ++r)
    for (int64_t i = 0; i < n; ++i) sum[i] += parts[r][i];
  const float scale = 1.f / static_cast<float>(parts.size());
  for (int64_t i = 0; i < n; ++i) sum[i] *= scale;
  solver.update_block(value, sum, state, n, param.lr_mult, param.decay_mult, step);
  done();
}

void HostCompute::update(Solver& solver, const std::vector<Param*>& params, const WorkDone& done) {
  solver.update_all(params);  // on a GPU (a bucket updated on its device) in few launches
  done();
}

void HostCompute::rebuild(Solver& solver, const Factors& f, int ranks, Param& weight, Param* bias,
                          const WorkDone& done) {
  const float scale = 1.f / static_cast<float>(ranks);
  if (rebuild_gemm_)
    rebuild_gemm_(true, false, f.m, f.n, f.rows, scale, f.output_grads, f.inputs, 0.f, weight.grad.data());
  else
    gemm(true, false, f.m, f.n, f.rows, scale, f.output_grads, f.inputs, 0.f, weight.grad.data());
  solver.update(weight);
  if (bias) {
    float* db = bias->grad.data();
    std::fill(db, db + f.m, 0.f);
    for (int64_t r = 0; r < f.rows; ++r) {
      const float* u = f.output_grads + r * f.m;
      for (int64_t o = 0; o < f.m; ++o) db[o] += u[o];
    }
    for (int64_t o = 0; o < f.m; ++o) db[o] *= scale;
    solver.update(*bias);
  }
  done();
}

void TracingCompute::traced(const std::string& what, const std::function<void()>& work) {
  Timeline* timeline = timeline_.load();
  if (!timeline) return work();
  const auto begin = Timeline::Clock::now();
  work();
  timeline->add("update " + what, "update", Timeline::update, begin, Timeline::Clock::now());
}

void TracingCompute::update_block(Solver& solver, const Param& param, float* value,
                                  const std::vector<const float*>& parts, float* sum, float* state, int64_t step,
                                  int64_t n, const WorkDone& done) {
  traced(param.name + " (a block)",
         [&] { inner_->update_block(solver, param, value, parts, sum, state, step, n, done); });
}

void TracingCompute::update(Solver& solver, const std::vector<Param*>& params, const WorkDone& done) {
  std::string what = params.empty() ? "nothing" : params.front()->name;
  if (params.size() > 1) what += " and " + std::to_string(params.size() - 1) + " more";
  traced(what, [&] { inner_->update(solver, params, done); });
}

void TracingCompute::rebuild(Solver& solver, const Factors& factors, int ranks, Param& weight, Param* bias,
                             const WorkDone& done) {
  traced(weight.name + " (SFB rebuild)", [&] { inner_->rebuild(solver, factors, ranks, weight, bias, done); });
}

}  // namespace poseidon::dist
