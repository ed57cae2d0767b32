// Trainer: the training loop. Feeds batches from the loader into the Net,
// runs forward and backward with the LocalGradSink (one process) or a
// dist::Session (an MPI job: each rank trains on its shard of every epoch,
// test results are summed over the ranks, rank 0 alone writes metrics,
// progress and checkpoints), tests at intervals, and writes metrics and
// atomic checkpoints. A checkpoint holds
// parameters, solver state, iteration, loader position and RNG state, so a
// resumed run computes exactly what an uninterrupted run would.
// A NaN or infinite loss, or gradient (solver.check_finite), stops training
// with an Error naming the iteration, layer and tensor, after saving the
// state from before that iteration as an ordinary snapshot.
// Alone, an iteration's loss and finite verdict are read after the next
// iteration is issued (at once where something is displayed or saved after
// it): a GPU is not waited for between iterations, and what is reported and
// saved stays the same.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "core/device_pipeline.h"
#include "core/finite_check.h"
#include "core/local_sink.h"
#include "core/net.h"
#include "core/solver.h"
#include "data/loader.h"
#if defined(POSEIDON_HAVE_CUDA) && defined(POSEIDON_HAVE_IMAGES)
#include "data/gpu_image_feed.h"
#define POSEIDON_GPU_IMAGE_FEED 1
#endif
#include "dist/plan/plan_file.h"
#include "dist/schemes/emulated_compute.h"
#include "dist/session/session.h"
#include "tools/cli/train_config.h"

namespace poseidon {

struct EvalResult {
  double loss = 0;
  std::map<std::string, double> metrics;  // e.g. "accuracy"
  int64_t examples = 0;
};

// Averages loss and metric outputs over the loader's batches (all of one
// epoch when max_batches is 0), weighting each batch by its size.
EvalResult evaluate(Net& net, Loader& loader, int64_t max_batches);

// Fails at `where` unless the source's examples fit the net's first input
// and the net has a second input for labels.
void check_sample_shape(Net& net, const Source& source, const ConfigNode& where);

// Feeds one batch into the net's first two inputs (data, labels). For a net
// on a GPU the loader fills the host tensors `staged_data` and
// `staged_labels`, which are then copied up.
void feed_batch(Net& net, Loader& loader, Tensor& staged_data, Tensor& staged_labels);

// Batches from the caller in place of data.train's loader (the Python
// package's data sources). next() fills host tensors shaped as the net's
// first two inputs; position() counts epochs and batches as the loader's does.
class BatchFeed {
 public:
  virtual ~BatchFeed() = default;
  virtual void next(Tensor& data, Tensor& labels) = 0;
  virtual LoaderPosition position() const = 0;
};

// What `poseidon train` checks before any work: the memory the model needs
// (each rank its own) and, on the rank that writes (`writer`), the output
// directory; prints the config's warnings there.
void check_before_training(const TrainConfig& config, bool writer, bool quiet);

struct TrainOptions {
  std::string resume;   // checkpoint to continue from
  std::string weights;  // initial parameters (e.g. exported from PyTorch)
  bool quiet = false;
  const dist::World* world = nullptr;  // the MPI job; null or one rank: training in this process alone
  std::string timeline;                // Chrome trace to write at the end ("" : none)
  std::string emulate_compute;         // profile whose per-layer times replace computing ("" : compute)
  double emulate_scale = 1;            // multiplies those times
  bool replan = false;                 // hybrid: probe the link anew rather than reuse recorded figures
  std::shared_ptr<BatchFeed> feed;     // training batches from the caller; null: data.train's loader
};

class Trainer {
 public:
  Trainer(TrainConfig config, TrainOptions options);
  ~Trainer();
  // Trains until solver.max_iter; returns the final test result when a test
  // set is configured.
  EvalResult run();
  Net& net() { return *net_; }
  int64_t iteration() const { return iter_; }
  std::string checkpoint_path(const std::string& tag) const;
  void save(const std::string& path);

 private:
  Tensor staged_data_, staged_labels_;  // host side of a GPU net's inputs
  // A GPU net's inputs from staged_data_ and staged_labels_, through pinned
  // buffers without waiting for the device (device_memory::Uploader).
  std::unique_ptr<device_memory::Uploader> data_upload_, labels_upload_;
  void upload_batch();
  EvalResult test();
  void next_train_batch();                // from the feed or data.train's loader
  LoaderPosition train_position() const;  // of the batch next_train_batch gives
  std::map<std::string, std::string> checkpoint_metadata(int64_t iter, const LoaderPosition& pos,
                                                         const std::mt19937_64& rng) const;
  void restore(const std::string& path);
  // The CPU's bf16 kernels for this run (layers/dnnl_support.h): the
  // environment's or else those the resumed checkpoint names, else measured;
  // in a job rank 0's.
  void choose_cpu_bf16_kernels();
  // One training iteration as the loop issues it and later reads it.
  struct Step {
    int64_t iter = 0;  // iterations completed before it
    int64_t epoch = 0;
    LoaderPosition position;     // of its batch
    std::mt19937_64 rng_before;  // the RNG state it started from
    double lr = 0, data_wait_s = 0;
    float loss = 0;
    bool finite = true;                     // its loss and every gradient it computed
    std::optional<NonFinite> bad_gradient;  // where, when found at once
    std::string what;                       // what was not finite, where the guard could say at once
    bool display = false, test = false, snapshot = false;
    int signal = 0;  // the stop signal seen once it was issued
    // Read at once, not after the next iteration is issued: something is
    // reported or saved after it, or it is the last.
    bool boundary(int64_t max_iter) const { return display || test || snapshot || signal != 0 || iter + 1 == max_iter; }
  };
  // Runs the failing iteration `s` again from the state it started from
  // (its updates, and any issued after it, discarded; the buffers `before`
  // it restored) and says where its values first turned non-finite.
  // `later_issued`: an iteration after it was issued (and turned into nothing).
  std::string repeat_non_finite(const Step& s, const Tensor& before, LocalGradSink& held, bool later_issued);
  // Throws the Error for a non-finite `what` found in the iteration after
  // iter_, saving first the state from before it: parameters and solver
  // state (untouched by that iteration), buffers (restored by run() to those
  // before its forward), the loader position `pos` and RNG state `rng` it
  // started from.
  // In an MPI job every rank stops together and nothing is saved (the
  // optimizer state is sharded across ranks).
  [[noreturn]] void stop_non_finite(const std::string& what, int64_t epoch, const LoaderPosition& pos,
                                    const std::mt19937_64& rng);

  TrainConfig config_;
  TrainOptions options_;
  std::unique_ptr<Net> net_;
  std::unique_ptr<Solver> solver_;
  std::unique_ptr<Loader> train_loader_, test_loader_;
#ifdef POSEIDON_GPU_IMAGE_FEED
  std::unique_ptr<GpuImageFeed> gpu_feed_;  // data.train's JPEGs decoded by nvJPEG on the GPU
#endif
  bool gpu_decoding_ = false;  // gpu_feed_ is in use: batches are decoded in next_train_batch
  int64_t skipped_images() const;
  int rank_ = 0, world_size_ = 1;
  std::optional<dist::EmulatedCompute> emulated_;  // with --emulate-compute
  // Before session_, so that the session's threads, which record into it,
  // have stopped when it goes.
  std::unique_ptr<dist::Timeline> timeline_;  // with --timeline
  std::unique_ptr<dist::Session> session_;    // only in a job of several ranks
  std::mt19937_64 rng_;
  int64_t iter_ = 0;
  std::optional<dist::LinkModel> resumed_link_;              // the link figures the resumed checkpoint recorded
  std::map<std::string, DeferredTensor> compression_state_;  // the resumed checkpoint's, until the session takes it
  // Where this run's plan comes from: pinned by dist.plan_file, reused
  // figures (the checkpoint's, or the output directory's plan.json), or none.
  dist::SessionOptions plan_origin(std::string& said);
  std::string plan_record_path() const;  // <output_dir>/plan.json
  std::string plan_said_;                // the plan's origin, for the log
};

}  // namespace poseidon
