// TrainConfig: a training config file (model + data + solver + train
// settings), validated key by key, with command-line overrides applied.
//
//   model: ../models/lenet.yaml      # relative to this file
//   seed: 1
//   threads: 2
//   device: cpu
//   precision: fp32                # fp32, bf16 or tf32 (GPU): core/precision.h
//   data:
//     train: {source: idx, images: ..., labels: ..., batch_size: 64, shuffle: true}
//     test:  {source: idx, images: ..., labels: ..., batch_size: 100}
//   solver: {type: sgd, lr: 0.01, momentum: 0.9, max_iter: 5000, ...}
//   train: {display: 100, test_interval: 1000, test_iters: 0, snapshot_interval: 0,
//           final_checkpoint: true, output_dir: runs/lenet}
//   dist: {scheme: hybrid, wfbp: true, ...}   # used under mpirun; see dist/plan/dist_config.h
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/capture_schedule.h"
#include "core/config_node.h"
#include "core/precision.h"
#include "core/solver.h"
#include "core/tensor.h"
#include "dist/plan/dist_config.h"

namespace poseidon {

struct DataConfig {
  ConfigNode node;  // the source's own keys, read by make_source
  int64_t batch_size = 64;
  bool shuffle = true;
};

struct TrainConfig {
  std::string file;      // the config file
  std::string base_dir;  // its folder: relative paths resolve against it
  std::string model_file;
  ConfigNode model;      // the model tree, with "net." overrides applied
  uint64_t seed = 1;
  int threads = 0;       // 0: all cores
  Device device;
  bool device_index_given = false;  // "cuda:N" rather than "cuda" (dist/runtime/device_choice.h)
  Precision precision = Precision::fp32;
  // GPU convolutions' backward algorithms: deterministic only, or cuDNN's
  // fastest (device_memory::set_deterministic); unset: the process default.
  std::optional<bool> deterministic;
  // Whether a GPU run's steady training steps may run as a CUDA graph
  // (core/graphed_step.h).
  CudaGraphMode cuda_graph = CudaGraphMode::automatic;
  DataConfig train_data;
  std::optional<DataConfig> test_data;
  SolverConfig solver;
  int64_t display = 100;
  int64_t test_interval = 0;   // 0: test only at the end
  int64_t test_iters = 0;      // 0: the whole test set
  int64_t snapshot_interval = 0;
  bool final_checkpoint = true;  // false: no final.safetensors (benchmarks that only time training)
  std::string output_dir = "runs/default";
  SourceLocation output_dir_location;  // train.output_dir in the file (or its override)
  dist::DistConfig dist;  // how ranks synchronise when the job has several
  // Settings that are allowed but almost certainly not meant (a warm-up
  // longer than the run), one located line each, for the CLI to print.
  std::vector<std::string> warnings;

  // Loads `file`; each override is "key=value" for the config ("solver.lr=0.1")
  // or, prefixed "net.", for the model ("net.layers.fc2.num_output=5").
  static TrainConfig load(const std::string& file, const std::vector<std::string>& overrides);
};

// Loads a model file with overrides applied to its tree; errors in their
// values name "--set <shown_prefix><override>".
ConfigNode load_model(const std::string& file, const std::vector<std::string>& overrides,
                      const std::string& shown_prefix = "");

// Makes train.output_dir usable before any work (ConfigError at the key when
// a file is in the way or it cannot be created or written) and removes the
// temporary checkpoint files a run killed while writing left there. Returns
// the paths removed.
std::vector<std::string> prepare_output_dir(const TrainConfig& config);

// True when the YAML file is a training config (has `model:`), false for a model file.
bool is_train_config(const std::string& file);

// What the plan and simulate verbs read from a training config or a model
// file: the model, the per-rank batch (the config's, else 32; `batch` > 0
// overrides both) and the dist section (defaults for a model file).
struct DistModel {
  ConfigNode model;
  int64_t batch = 32;
  dist::DistConfig dist;
};
DistModel load_dist_model(const std::string& file, const std::vector<std::string>& overrides, int64_t batch);

}  // namespace poseidon
