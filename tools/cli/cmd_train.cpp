// The train and test verbs.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/math.h"
#include "dist/runtime/comm.h"
#include "tools/cli/commands.h"
#include "tools/cli/stop_signal.h"
#include "tools/cli/trainer.h"

namespace poseidon {

namespace {
// Weights saved from a model whose layers differ from this one's (in layers
// without parameters, the only difference loading lets through): a warning,
// or with --strict an error.
void report_layer_mismatch(const std::string& weights, const LayerMismatch& m, bool strict) {
  if (m.missing.empty() && m.extra.empty()) return;
  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  std::string what = weights + ": the weights were saved from a model with other layers:";
  if (!m.missing.empty()) what += " the model has " + join(m.missing) + ", which the weights' model had not;";
  if (!m.extra.empty()) what += " the weights' model had " + join(m.extra) + ", which this model has not;";
  what.pop_back();
  if (strict) throw Error(what + " (--strict)");
  std::fprintf(stderr, "warning: %s\n", what.c_str());
}
}  // namespace

int cmd_train(const TrainArgs& args) {
  catch_stop_signals();  // before MPI's threads and ours, which then never take the signals
  dist::World world;     // an MPI job when mpirun or srun started this process
  // Outlives the handler below: in a job of several ranks the job ends
  // before the trainer's teardown, which may wait on peers that will never
  // answer (a collective still queued on a GPU's NCCL stream).
  std::unique_ptr<Trainer> trainer;
  try {
    TrainConfig config = TrainConfig::load(args.config, args.overrides);
    check_before_training(config, world.rank() == 0, args.quiet);
    TrainOptions options;
    options.resume = args.resume;
    options.weights = args.weights;
    options.quiet = args.quiet;
    options.world = &world;
    options.timeline = args.timeline;
    options.emulate_compute = args.emulate_compute;
    options.emulate_scale = args.emulate_scale;
    options.replan = args.replan;
    trainer = std::make_unique<Trainer>(std::move(config), std::move(options));
    trainer->run();
  } catch (const std::exception& e) {
    // The other ranks would wait for this one forever: end the whole job.
    if (world.size() > 1) {
      std::fprintf(stderr, "error: rank %d: %s\n", world.rank(), e.what());
      world.abort(dynamic_cast<const Error*>(&e) ? 2 : 1);
    }
    throw;
  }
  return 0;
}

int cmd_test(const TestArgs& args) {
  TrainConfig config = TrainConfig::load(args.config, args.overrides);
  if (!config.test_data) throw Error(args.config + ": no data.test section to evaluate on");
  set_num_threads(config.threads);
  const DataConfig& d = *config.test_data;
  Net net(config.model, d.batch_size, config.device);
  net.fuse_relus();
  report_layer_mismatch(args.weights, compare_checkpoint_layers(load_checkpoint(args.weights, net, nullptr), net),
                        args.strict);
  LoaderConfig lc;
  lc.batch_size = d.batch_size;
  lc.shuffle = false;
  read_loader_keys(d.node, lc);
  auto source = make_source(d.node, config.base_dir);
  check_sample_shape(net, *source, d.node);
  Loader loader(source, lc);
  EvalResult r = evaluate(net, loader, config.test_iters);
  if (args.json) {
    nlohmann::json out = {{"loss", r.loss}, {"examples", r.examples}};
    for (const auto& [k, v] : r.metrics) out[k] = v;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("examples %lld  loss %.6f", static_cast<long long>(r.examples), r.loss);
    for (const auto& [k, v] : r.metrics) std::printf("  %s %.4f", k.c_str(), v);
    std::printf("\n");
  }
  return 0;
}

}  // namespace poseidon
