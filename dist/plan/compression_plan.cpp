// Costs of the bf16 wire and of low-rank compression, and the planner's
// compression choices (see compression_plan.h).
#include "dist/plan/compression_plan.h"

#include "dist/plan/plan.h"

namespace poseidon::dist {

namespace {
double link_seconds(double numbers, const LinkModel& link) { return numbers / 2 * 4 / (link.bandwidth_gbps * 1e9 / 8); }
}  // namespace

SchemeCost lowrank_cost(int64_t rows, int64_t cols, int64_t others, int rank, int ranks, const LinkModel& link) {
  SchemeCost c;
  if (ranks < 2) return c;
  const double factors = static_cast<double>(rank) * static_cast<double>(rows + cols) + static_cast<double>(others);
  c.numbers = 4.0 * (ranks - 1) / ranks * factors;
  const double flops = 6.0 * rows * cols * rank + 2.0 * rows * rank * rank + factors;
  c.seconds =
      link_seconds(c.numbers, link) + 4.0 * (ranks - 1) * link.latency_us * 1e-6 + flops / (link.gemm_gflops * 1e9);
  return c;
}

void plan_compression(std::vector<LayerPlan>& layers, Net& net, int ranks, const LinkModel& link,
                      const DistConfig& config) {
  for (LayerPlan& lp : layers) {
    int64_t elements = 0;
    for (const Shape& s : lp.shapes) elements += shape_numel(s);
    if (!config.lowrank || !lowrank_applicable(net, lp.layer, config.lowrank_rank)) continue;
    const Shape& w = lp.shapes[0];
    const int64_t rows = w[0], cols = shape_numel(w) / rows;
    const SchemeCost lr = lowrank_cost(rows, cols, elements - rows * cols, config.lowrank_rank, ranks, link);
    if (lr.seconds < lp.cost.seconds) {
      lp.scheme = Scheme::lowrank;
      lp.cost = lr;
    }
  }
}

}  // namespace poseidon::dist
