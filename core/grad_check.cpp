// Finite-difference gradient checker: drives one layer without a Net.
#include "core/grad_check.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "core/registry.h"
#include "core/relu_fusion.h"

namespace poseidon {

namespace {
struct Harness {
  std::unique_ptr<Layer> layer;
  std::vector<Tensor> in, in_grad, out, out_grad, projection;
  // What the input gradients hold before backward: away from zero, since
  // backward must add to them (another path may have written there first).
  std::vector<Tensor> in_grad_before;
  LayerIO io;
  uint64_t seed = 7;
  Phase phase = Phase::train;

  double loss() {
    std::mt19937_64 rng(seed);  // stochastic layers see the same draws every call
    RunContext ctx{phase, &rng, {}};
    layer->forward(io, ctx);
    double l = 0;
    for (size_t k = 0; k < out.size(); ++k)
      for (int64_t i = 0; i < out[k].numel(); ++i) l += double(out[k][i]) * projection[k][i];
    return l;
  }
  void backward() {
    std::mt19937_64 rng(seed);
    RunContext ctx{phase, &rng, {}};
    loss();
    for (size_t k = 0; k < in_grad.size(); ++k) in_grad[k].copy_from(in_grad_before[k]);
    for (size_t k = 0; k < out.size(); ++k) out_grad[k].copy_from(projection[k]);
    rng.seed(seed);
    layer->backward(io, ctx);
  }
  // What backward added to input k's gradient.
  Tensor added_to_input_grad(size_t k) const {
    Tensor added(in_grad[k].shape());
    for (int64_t i = 0; i < added.numel(); ++i) added[i] = in_grad[k][i] - in_grad_before[k][i];
    return added;
  }
};

// Distinct values spaced by 4*step, none within 2*step of zero, in random order.
void fill_distinct(Tensor& t, double step, std::mt19937_64& rng) {
  std::vector<int64_t> order(t.numel());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const double spacing = 4 * step;
  const int64_t half = t.numel() / 2;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t k = order[i] - half;
    t[i] = static_cast<float>((k >= 0 ? k + 0.5 : k - 0.5) * spacing);
  }
}
}  // namespace

GradCheckReport run_grad_check(const GradCase& c) {
  Harness h;
  h.phase = c.train ? Phase::train : Phase::test;
  ConfigNode config = ConfigNode::parse(c.yaml, c.name);
  h.layer = LayerRegistry::instance().create(config);
  if (c.fuse_relu) {
    auto* fusable = dynamic_cast<ReluFusable*>(h.layer.get());
    POSEIDON_REQUIRE(fusable && fusable->fuse_relu()) << c.name << ": layer type '" << h.layer->type()
                                                      << "' cannot apply a ReLU of its own";
  }
  std::vector<Shape> out_shapes = h.layer->reshape(c.inputs);
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);

  for (size_t k = 0; k < c.inputs.size(); ++k) {
    h.in.emplace_back(c.inputs[k]);
    h.in_grad.emplace_back(c.inputs[k]);
    h.in_grad_before.emplace_back(c.inputs[k]);
    for (int64_t i = 0; i < h.in_grad_before[k].numel(); ++i) h.in_grad_before[k][i] = uni(rng);
    int64_t classes = k < c.label_classes.size() ? c.label_classes[k] : 0;
    if (classes > 0) {
      for (int64_t i = 0; i < h.in[k].numel(); ++i) h.in[k][i] = static_cast<float>(rng() % classes);
    } else {
      // Inputs spread enough that a step never reorders or crosses zero.
      fill_distinct(h.in[k], c.step, rng);
    }
  }
  for (const auto& s : out_shapes) {
    h.out.emplace_back(s);
    h.out_grad.emplace_back(s);
    h.projection.emplace_back(s);
    for (int64_t i = 0; i < h.projection.back().numel(); ++i) h.projection.back()[i] = uni(rng);
  }
  for (auto& p : h.layer->params()) {
    p.value = Tensor(p.shape);
    p.grad = Tensor(p.shape);
    if (p.name.ends_with("running_var")) {
      p.value.fill(1.f);
    } else {
      for (int64_t i = 0; i < p.value.numel(); ++i) p.value[i] = uni(rng);
    }
  }
  for (size_t k = 0; k < h.in.size(); ++k) {
    h.io.in.push_back(&h.in[k]);
    bool is_label = k < c.label_classes.size() && c.label_classes[k] > 0;
    h.io.in_grad.push_back(is_label ? nullptr : &h.in_grad[k]);
  }
  for (size_t k = 0; k < h.out.size(); ++k) {
    h.io.out.push_back(&h.out[k]);
    h.io.out_grad.push_back(&h.out_grad[k]);
  }

  // Buffers (running statistics) must not drift between the probes.
  std::vector<std::vector<float>> buffers;
  for (auto& p : h.layer->params())
    if (!p.learnable) buffers.emplace_back(p.value.data(), p.value.data() + p.value.numel());
  auto restore_buffers = [&] {
    size_t b = 0;
    for (auto& p : h.layer->params())
      if (!p.learnable) std::copy(buffers[b].begin(), buffers[b].end(), p.value.data()), ++b;
  };

  h.backward();
  restore_buffers();
  GradCheckReport report;
  std::ostringstream err;
  int failures = 0;
  auto probe = [&](const std::string& what, Tensor& x, const Tensor& analytic) {
    GradCheckEntry& entry = report.entries.emplace_back();
    entry.what = what;
    entry.checked = x.numel();
    for (int64_t i = 0; i < x.numel(); ++i) {
      float saved = x[i];
      x[i] = static_cast<float>(saved + c.step);
      double up = h.loss();
      restore_buffers();
      x[i] = static_cast<float>(saved - c.step);
      double down = h.loss();
      restore_buffers();
      x[i] = saved;
      double numeric = (up - down) / (2 * c.step);
      double a = analytic[i];
      double scale = std::max({std::abs(a), std::abs(numeric), 1.0});
      entry.max_error = std::max(entry.max_error, std::abs(a - numeric) / scale);
      if (std::abs(a - numeric) > c.tolerance * scale) {
        ++entry.mismatches;
        if (++failures <= 5)
          err << what << "[" << i << "]: analytic " << a << " numeric " << numeric << "\n";
      }
    }
  };
  for (size_t k = 0; k < h.in.size(); ++k)
    if (h.io.in_grad[k]) probe("input " + std::to_string(k), h.in[k], h.added_to_input_grad(k));
  for (auto& p : h.layer->params()) {
    if (!p.learnable) continue;
    Tensor analytic(p.grad.shape());
    analytic.copy_from(p.grad);
    probe(p.name, p.value, analytic);
  }
  if (failures) err << failures << " mismatches in total";
  report.mismatches = err.str();
  return report;
}

std::string check_gradients(const GradCase& c) { return run_grad_check(c).mismatches; }

}  // namespace poseidon
