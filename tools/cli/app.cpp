// CLI dispatch: the verb table and the error policy (bad input -> one line
// on stderr and exit 2; internal failures -> exit 1).
#include "tools/cli/app.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <yaml-cpp/exceptions.h>

#include "core/error.h"
#include "core/plugin.h"
#include "tools/cli/commands.h"

namespace poseidon {

int run_cli(int argc, char** argv) {
  CLI::App app{"poseidon: train and benchmark deep networks, alone or distributed"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Expand all help");
  app.set_version_flag("--version", "poseidon " POSEIDON_VERSION, "print the version and exit");

  TrainArgs train;
  auto* t = app.add_subcommand("train", "train a model from a YAML training config");
  t->add_option("config", train.config, "training config (YAML)")->required();
  t->add_option("--set", train.overrides, "override a key: solver.lr=0.1, net.layers.fc2.num_output=5");
  t->add_option("--resume", train.resume, "continue from a checkpoint");
  t->add_option("--weights", train.weights, "initial parameters (safetensors)");
  t->add_flag("--quiet", train.quiet, "no progress output");
  t->add_option("--timeline", train.timeline,
                "write a Chrome trace (layers, waits, transfers); FILE.rankN.json per rank under mpirun");
  t->add_option("--emulate-compute", train.emulate_compute,
                "wait each layer's profiled time (poseidon time --json) instead of computing it; "
                "communication stays real (for emulated clusters, tools/cluster)");
  t->add_option("--emulate-scale", train.emulate_scale, "multiply the --emulate-compute times by this factor")
      ->check(CLI::PositiveNumber);
  t->add_flag("--replan", train.replan,
              "hybrid: probe the link and plan anew, instead of reusing the figures recorded in the checkpoint "
              "or in the output directory's plan.json");

  TestArgs test;
  auto* te = app.add_subcommand("test", "evaluate weights on the config's test data");
  te->add_option("config", test.config, "training config (YAML)")->required();
  te->add_option("--weights", test.weights, "parameters to evaluate (safetensors)")->required();
  te->add_option("--set", test.overrides, "override a key");
  te->add_flag("--json", test.json, "machine-readable output");
  te->add_flag("--strict", test.strict,
               "weights saved from a model with other layers (without parameters) are an error, not a warning");

  GradientsArgs grads;
  auto* gr = app.add_subcommand(
      "gradients", "one forward and backward on the first training batch; write every parameter's gradient");
  gr->add_option("config", grads.config, "training config (YAML)")->required();
  gr->add_option("--weights", grads.weights, "parameters (safetensors; default: the config's initialisation)");
  gr->add_option("-o,--output", grads.output, "safetensors file to write")->required();
  gr->add_option("--set", grads.overrides, "override a key");

  TimeArgs time;
  auto* ti = app.add_subcommand("time", "per-layer forward and backward time on synthetic data");
  ti->add_option("file", time.file, "model or training config (YAML)")->required();
  ti->add_option("--set", time.overrides, "override a key");
  ti->add_option("--batch", time.batch, "batch size")->check(CLI::PositiveNumber);
  ti->add_option("--iters", time.iters, "timed iterations")->check(CLI::PositiveNumber);
  ti->add_option("--warmup", time.warmup, "untimed iterations first")->check(CLI::NonNegativeNumber);
  ti->add_option("--threads", time.threads, "threads (0: all cores)")->check(CLI::NonNegativeNumber);
  ti->add_option("--device", time.device, "cpu, cuda or cuda:N (default: the config's device, else cpu)");
  ti->add_option("--precision", time.precision, "fp32, bf16 or tf32 (GPU) (default: the config's, else fp32)")
      ->check(CLI::IsMember({"fp32", "bf16", "tf32"}));
  ti->add_option("--deterministic", time.deterministic,
                 "true: GPU convolutions' backward takes deterministic algorithms only; false: cuDNN's fastest "
                 "(default: the config's, else true unless POSEIDON_CUDNN_FASTEST=1)");
  ti->add_flag("--json", time.json, "machine-readable output");

  SummaryArgs summary;
  auto* s = app.add_subcommand(
      "summary", "per-layer output shapes, parameters, FLOPs and the memory training needs (at --batch)");
  s->add_option("file", summary.file, "model or training config (YAML)")->required();
  s->add_option("--set", summary.overrides, "override a key");
  s->add_option("--batch", summary.batch, "batch size for shapes, FLOPs and memory")->check(CLI::PositiveNumber);
  s->add_flag("--json", summary.json, "machine-readable output");

  PlanArgs plan;
  auto* pl =
      app.add_subcommand("plan", "per layer: the communication scheme HybComm picks, bytes moved, estimated time");
  pl->add_option("file", plan.file, "model or training config (YAML)")->required();
  pl->add_option("--workers", plan.workers, "ranks P (workers, each also a server)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  pl->add_option("--batch", plan.batch, "examples per rank K (default: the config's, or 32)")
      ->check(CLI::PositiveNumber);
  pl->add_option("--bandwidth", plan.bandwidth_gbps,
                 "link bandwidth, Gbit/s (default: the config's dist.bandwidth_gbps, or 10)")
      ->check(CLI::PositiveNumber);
  pl->add_option("--latency", plan.latency_us, "per-message latency, microseconds (default: the config's, or 20)")
      ->check(CLI::NonNegativeNumber);
  pl->add_option("--gflops", plan.gemm_gflops,
                 "GEMM rate that rebuilds SFB gradients, GFLOP/s (default: the config's, or measured here)")
      ->check(CLI::PositiveNumber);
  pl->add_option("--out", plan.out, "also write the plan to FILE, which dist.plan_file pins in training");
  pl->add_flag("--tune", plan.tune,
               "search scheme, all-reduce algorithm, bucket and block sizes and order by simulating --profile");
  pl->add_option("--profile", plan.profile, "--tune: per-layer times (poseidon time --json; profiles/ holds some)");
  pl->add_option("--iterations", plan.iterations, "--tune: iterations simulated per candidate")
      ->check(CLI::Range(2, 1000));
  pl->add_option("--set", plan.overrides, "override a key");
  pl->add_flag("--json", plan.json, "machine-readable output");

  SimulateArgs sim;
  auto* si = app.add_subcommand("simulate", "predict iteration time and speed-up on P ranks (discrete-event model)");
  si->add_option("file", sim.file, "model or training config (YAML)")->required();
  si->add_option("--workers", sim.workers, "ranks P, e.g. 1,2,4,8")
      ->required()
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  si->add_option("--bandwidth", sim.bandwidth_gbps, "each rank's link, Gbit/s each way, e.g. 10,40")
      ->required()
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  si->add_option("--latency", sim.latency_us, "per-message latency, microseconds (default: the config's, or 20)")
      ->check(CLI::NonNegativeNumber);
  si->add_option("--profile", sim.profile, "per-layer times (poseidon time --json; default: FLOPs at --gflops)");
  si->add_option("--scheme", sim.schemes, "hybrid, ps, sfb, allreduce (default: the config's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"hybrid", "ps", "sfb", "allreduce"}));
  si->add_option("--wfbp", sim.wfbp, "true, false (default: the config's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"true", "false"}));
  si->add_option("--order", sim.order, "backward or priority (default: the config's)")
      ->check(CLI::IsMember({"backward", "priority"}));
  si->add_option("--gflops", sim.gemm_gflops, "compute rate, GFLOP/s (default: the profile's, or measured here)")
      ->check(CLI::PositiveNumber);
  si->add_option("--batch", sim.batch, "examples per rank (default: the profile's, the config's, or 32)")
      ->check(CLI::PositiveNumber);
  si->add_option("--iterations", sim.iterations, "iterations simulated (steady state: the second half)")
      ->check(CLI::Range(2, 1000));
  si->add_option("--set", sim.overrides, "override a key");
  si->add_flag("--per-rank", sim.per_rank, "each rank's link busy time");
  si->add_flag("--json", sim.json, "machine-readable output");

  PlotArgs plot;
  auto* po = app.add_subcommand("plot", "curves of runs' metrics.jsonl (loss, accuracy, lr, img/s) in a PNG");
  po->add_option("runs", plot.runs, "metrics.jsonl files or the output_dirs holding them; several share one figure")
      ->required();
  po->add_option("-o,--output", plot.output, "PNG to write (default: RUN/curves.png for one run, else curves.png)");
  po->add_option("--labels", plot.labels, "legend labels, comma-separated, one per run (default: the run folders)");

  DataShardArgs shard;
  auto* da = app.add_subcommand("data", "prepare data sets");
  auto* sh = da->add_subcommand("shard", "write an image folder or list as tar shards in WebDataset's layout");
  sh->add_option("--folder", shard.folder, "image folder (root/<class name>/<images>)");
  sh->add_option("--list", shard.list, "list file, one 'relative/path label' per line");
  sh->add_option("--root", shard.root, "where the list's relative paths start (default: the list's folder)");
  sh->add_option("-o,--out", shard.out, "prefix of the shards: PREFIX-000000.tar ... and the index PREFIX.json")
      ->required();
  sh->add_option("--per-shard", shard.per_shard, "examples per shard")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  sh->add_option("--seed", shard.seed, "shuffle the examples across shards with this seed (0: keep their order)");
  DataPlacementArgs placement;
  auto* dp = da->add_subcommand("placement",
                                "the tar shards each rank of a run opens, epoch by epoch (what each host must hold)");
  dp->add_option("config", placement.config, "training config (data.train: source: tar_shards)")->required();
  dp->add_option("--ranks", placement.ranks, "ranks of the run (mpirun -np)")->required()->check(CLI::Range(1, 1 << 20));
  dp->add_option("--epochs", placement.epochs, "epochs to list (default: those solver.max_iter covers)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  dp->add_option("--set", placement.overrides, "override a key");
  da->require_subcommand(1);

  auto* it = app.add_subcommand("import-torch",
                                "a torch.nn model (torch.fx) as a model YAML and safetensors weights; "
                                "see poseidon import-torch --help");
  it->prefix_command();
  it->set_help_flag();

  TraceMergeArgs trace_merge;
  auto* tr = app.add_subcommand("trace", "Chrome traces of `train --timeline`");
  tr->require_subcommand(1);
  auto* trm = tr->add_subcommand("merge", "the per-rank traces of one run as one trace, a process per rank");
  trm->add_option("traces", trace_merge.inputs,
                  "traces to merge; a path that does not exist stands for its per-rank files (run.json: "
                  "run.rank0.json, run.rank1.json, ...)")
      ->required();
  trm->add_option("-o,--output", trace_merge.output, "the merged trace to write")->required();

  bool layers_json = false;
  auto* l = app.add_subcommand("layers", "list the registered layer types and their keys");
  l->add_flag("--json", layers_json, "machine-readable output");

  CheckLayerArgs check;
  auto* ch = app.add_subcommand("check-layer", "finite-difference gradient check of one layer type (exit 1: it fails)");
  ch->add_option("type", check.type, "registered layer type")->required();
  ch->add_option("--set", check.settings, "a key of the layer's config: num_output=4, kernel_size=3");
  ch->add_option("--shape", check.shapes, "an input's shape, once per input: 2,3,8,8 (default: one 2,3,4,4)");
  ch->add_option("--labels", check.labels, "the last input holds class labels in [0, N)")->check(CLI::PositiveNumber);
  ch->add_flag("--test-phase", check.test_phase, "run the layer in the test phase");
  ch->add_option("--step", check.step, "finite-difference step")->check(CLI::PositiveNumber);
  ch->add_option("--tolerance", check.tolerance, "relative tolerance")->check(CLI::PositiveNumber);
  ch->add_flag("--given-values-only", check.given_values_only,
               "check only the values given (default: also each numeric key not given at another value)");

  bool info_json = false;
  auto* in = app.add_subcommand("info", "build configuration (CUDA, cuDNN, NCCL, MPI, BLAS versions) and visible GPUs");
  in->add_flag("--json", info_json, "machine-readable output");

  std::vector<std::string> plugins;
  for (auto* verb : app.get_subcommands([](CLI::App*) { return true; }))
    verb->add_option("--plugin", plugins, "load a plug-in library of layers first (repeatable)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s (see poseidon --help)\n", e.what());
    return 2;
  }

  try {
    for (const auto& p : plugins) load_plugin(p);
    if (*t) return cmd_train(train);
    if (*te) return cmd_test(test);
    if (*gr) return cmd_gradients(grads);
    if (*ti) return cmd_time(time);
    if (*s) return cmd_summary(summary);
    if (*l) return cmd_layers(layers_json);
    if (*ch) return cmd_check_layer(check);
    if (*in) return cmd_info(info_json);
    if (*pl) return cmd_plan(plan);
    if (*si) return cmd_simulate(sim);
    if (*po) return cmd_plot(plot);
    if (*sh) return cmd_data_shard(shard);
    if (*dp) return cmd_data_placement(placement);
    if (*it) return cmd_import_torch(it->remaining());
    if (*trm) return cmd_trace_merge(trace_merge);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const YAML::Exception& e) {
    std::fprintf(stderr, "error: YAML: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory (try a smaller batch)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 1;
  }
  return 1;
}

}  // namespace poseidon
