// The verbs of the poseidon CLI. Each returns the exit status; user errors
// are thrown as poseidon::Error and turned into status 2 by run_cli.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace poseidon {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume, weights;
  bool quiet = false;
  std::string timeline;  // Chrome trace file (one per rank under mpirun)
  std::string emulate_compute;  // per-layer times that replace computing (poseidon time --json)
  double emulate_scale = 1;
  bool replan = false;  // probe the link anew instead of reusing recorded figures
};
int cmd_train(const TrainArgs& args);

struct TestArgs {
  std::string config, weights;
  std::vector<std::string> overrides;
  bool json = false;
  bool strict = false;  // weights saved from a model with other layers: an error, not a warning
};
int cmd_test(const TestArgs& args);

struct GradientsArgs {
  std::string config, weights, output;
  std::vector<std::string> overrides;
};
int cmd_gradients(const GradientsArgs& args);

struct TimeArgs {
  std::string file;  // a model or a training config
  std::vector<std::string> overrides;
  int64_t batch = 0;  // 0: the config's batch size, or 32 for a model file
  int64_t iters = 10, warmup = 2;
  int threads = 0;
  std::string device;  // empty: the config's device, else cpu
  std::string precision;  // empty: the config's precision, else fp32
  std::optional<bool> deterministic;  // unset: the config's, else the process default
  bool json = false;
};
int cmd_time(const TimeArgs& args);

struct SummaryArgs {
  std::string file;
  std::vector<std::string> overrides;
  int64_t batch = 1;
  bool json = false;
};
int cmd_summary(const SummaryArgs& args);
int cmd_layers(bool json);

// Exit status 0: gradients agree; 1: they do not; 2: bad input.
struct CheckLayerArgs {
  std::string type;
  std::vector<std::string> settings;  // key=value of the layer's config
  std::vector<std::string> shapes;    // one per input, "2,3,8,8"; none: one 2,3,4,4
  int64_t labels = 0;                 // > 0: the last input holds labels in [0, labels)
  bool test_phase = false;
  double step = 1e-2, tolerance = 1e-3;
  bool given_values_only = false;  // not also each numeric key not given at another value
};
int cmd_check_layer(const CheckLayerArgs& args);
int cmd_info(bool json);

struct PlanArgs {
  std::string file;  // a model or a training config
  std::vector<std::string> overrides;
  int workers = 0;
  int64_t batch = 0;          // 0: the config's batch size, or 32 for a model file
  double bandwidth_gbps = 0;  // 0: the config's, or 10
  double latency_us = -1;     // < 0: the config's, or 20
  double gemm_gflops = 0;     // 0: measured
  bool json = false;
  std::string out;  // plan file to write (dist.plan_file pins it); "" : none
  // --tune: the options searched by the simulator on `profile` (tools/cli/cmd_plan_tune.cpp).
  bool tune = false;
  std::string profile;
  int iterations = 4;
};
int cmd_plan(const PlanArgs& args);
int cmd_plan_tune(const PlanArgs& args);

struct SimulateArgs {
  std::string file;  // a model or a training config
  std::vector<std::string> overrides;
  std::vector<int> workers;               // one row per value
  std::vector<double> bandwidth_gbps;     // one row per value
  double latency_us = -1;                 // < 0: the config's, or 20
  std::string profile;                    // `poseidon time --json` output; empty: FLOPs at gemm_gflops
  std::vector<std::string> schemes, wfbp;  // one row per value; empty: the config's
  std::string order;                      // empty: the config's
  double gemm_gflops = 0;                 // 0: the profile's, or measured
  int64_t batch = 0;                      // without a profile: 0 is the config's batch size, or 32
  int iterations = 8;
  bool json = false, per_rank = false;
};
int cmd_simulate(const SimulateArgs& args);

struct PlotArgs {
  std::vector<std::string> runs;  // metrics.jsonl files or the output_dirs holding them
  std::string output;             // PNG; empty: RUN/curves.png for one run, else curves.png
  std::string labels;             // comma-separated, one per run; empty: the run folders
};
int cmd_plot(const PlotArgs& args);

struct DataShardArgs {
  std::string folder, list, root;  // the images: an image folder, or a list file (paths relative to root)
  std::string out;                 // prefix: <out>-000000.tar ..., <out>.json
  int64_t per_shard = 1000;
  uint64_t seed = 1;  // 0: keep the folder's or list's order
};
int cmd_data_shard(const DataShardArgs& args);

struct DataPlacementArgs {
  std::string config;
  std::vector<std::string> overrides;
  int ranks = 1;
  int64_t epochs = 0;  // 0: those the config's max_iter covers
};
// The tar shards each rank of a run opens, epoch by epoch: what each host must hold.
int cmd_data_placement(const DataPlacementArgs& args);

// Every argument goes to tools/import_torch.py, --help included.
int cmd_import_torch(const std::vector<std::string>& args);

struct TraceMergeArgs {
  // Chrome traces; a path that does not exist stands for its per-rank files
  // (run.json: run.rank0.json, run.rank1.json, ...).
  std::vector<std::string> inputs;
  std::string output;
};
int cmd_trace_merge(const TraceMergeArgs& args);

}  // namespace poseidon
