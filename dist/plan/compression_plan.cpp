// Costs of the bf16 wire and of low-rank compression, and the planner's
// compression choices (see compression_plan.h).
#include "dist/plan/compression_plan.h"

#include <algorithm>

#include "dist/plan/plan.h"

namespace poseidon::dist {

AllreduceAlgorithm lowrank_algorithm(int64_t rows, int64_t cols, int64_t others, int rank, int ranks,
                                     const LinkModel& link, const CollectiveOptions& options) {
  const double larger = static_cast<double>(std::max(rank * rows + others, rank * cols));
  return choose_algorithm(larger, ranks, link, options);
}

std::vector<CollectiveStep> lowrank_steps(AllreduceAlgorithm algorithm, int64_t rows, int64_t cols, int64_t others,
                                          int rank, int ranks, const LinkModel& link, const CollectiveOptions& options) {
  std::vector<CollectiveStep> steps =
      allreduce_steps(algorithm, static_cast<double>(rank * rows + others), ranks, link, options);
  const auto q = allreduce_steps(algorithm, static_cast<double>(rank * cols), ranks, link, options);
  steps.insert(steps.end(), q.begin(), q.end());
  return steps;
}

SchemeCost lowrank_cost(int64_t rows, int64_t cols, int64_t others, int rank, int ranks, const LinkModel& link,
                        const CollectiveOptions& options) {
  SchemeCost c;
  if (ranks < 2) return c;
  const auto steps = lowrank_steps(lowrank_algorithm(rows, cols, others, rank, ranks, link, options), rows, cols,
                                   others, rank, ranks, link, options);
  const double factors = static_cast<double>(rank) * static_cast<double>(rows + cols) + static_cast<double>(others);
  c.numbers = steps_floats(steps);
  const double flops = 6.0 * rows * cols * rank + 2.0 * rows * rank * rank + factors;
  c.seconds = steps_seconds(steps, link, options) + flops / (link.gemm_gflops * 1e9);
  return c;
}

std::vector<int> lowrank_candidates(int min_rank) { return {min_rank, 2 * min_rank, 4 * min_rank, 8 * min_rank}; }

void plan_compression(std::vector<LayerPlan>& layers, Net& net, int ranks, const LinkModel& link,
                      const DistConfig& configured) {
  const DistConfig config = chosen_config(configured, ranks);
  const bool automatic = config.compression == Compression::automatic;
  if (!automatic && !(config.lowrank && config.compression == Compression::off)) return;
  const std::vector<int> ranks_weighed = automatic ? lowrank_candidates(config.compression_min_rank)
                                                   : std::vector<int>{config.lowrank_rank};
  for (LayerPlan& lp : layers) {
    int64_t elements = 0;
    for (const Shape& s : lp.shapes) elements += shape_numel(s);
    const Shape& w = lp.shapes[0];
    if (w.size() < 2) continue;
    const int64_t rows = w[0], cols = shape_numel(w) / rows;
    SchemeCost best;
    int best_rank = 0;
    for (int rank : ranks_weighed) {
      if (!lowrank_applicable(net, lp.layer, rank)) continue;
      const SchemeCost lr = lowrank_cost(rows, cols, elements - rows * cols, rank, ranks, link, config.collective);
      if (best_rank == 0 || lr.seconds < best.seconds) {
        best = lr;
        best_rank = rank;
      }
    }
    if (best_rank == 0) continue;
    const double cheapest_s = best.seconds;
    if (automatic)
      for (int rank : ranks_weighed) {
        if (rank <= best_rank || !lowrank_applicable(net, lp.layer, rank)) continue;
        const SchemeCost lr = lowrank_cost(rows, cols, elements - rows * cols, rank, ranks, link, config.collective);
        if (lr.seconds <= cheapest_s * 1.02) {
          best = lr;
          best_rank = rank;
        }
      }
    if (best.seconds < lp.cost.seconds * (automatic ? 0.99 : 1.0)) {
      lp.scheme = Scheme::lowrank;
      lp.cost = best;
      lp.rank = best_rank;
      lp.wire = Wire::fp32;
    }
  }
}

}  // namespace poseidon::dist
