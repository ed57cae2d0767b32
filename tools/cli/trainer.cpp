// The training loop, alone or as one rank of an MPI job, and its testing
// (checkpoints: trainer_checkpoint.cpp; non-finite stops: trainer_non_finite.cpp).
#include "tools/cli/trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <utility>

#include "core/checkpoint.h"
#include "core/device_memory.h"
#include "core/finite_check.h"
#include "core/graphed_step.h"
#include "core/local_sink.h"
#include "core/math.h"
#include "core/model_summary.h"
#include "core/step_gate.h"
#include "core/units.h"
#include "data/nvjpeg_library.h"
#include "dist/runtime/device_choice.h"
#include "tools/cli/label_check.h"
#include "tools/cli/progress.h"
#include "tools/cli/run_summary.h"
#include "tools/cli/stop_signal.h"

namespace poseidon {
namespace {
// "comm 1.23 MB/it sent, 4.50 ms/it, 87% hidden"
std::string comm_summary(const dist::CommStats& s) {
  const double n = static_cast<double>(std::max<int64_t>(1, s.iterations));
  std::string out = "comm " + human_bytes(s.bytes_sent / n) + "/it sent";
  if (s.comm_s > 0)
    out +=
        ", " + human_seconds(s.comm_s / n) + "/it, " + std::to_string(std::lround(s.hidden_share() * 100)) + "% hidden";
  return out;
}
}  // namespace

void check_before_training(const TrainConfig& config, bool writer, bool quiet) {
  const double available = device_memory_bytes(config.device);
  const ModelSummary summary = summarize_model(config.model, config.train_data.batch_size, config.solver.momentum != 0,
                                               available, memory_name(config.device, available), config.precision);
  require_memory(summary, config.device, available);
  if (!writer) return;
  for (const std::string& w : config.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  for (const std::string& path : prepare_output_dir(config))
    if (!quiet)
      std::printf("removed %s, a checkpoint left unfinished by a run that was stopped while writing it\n",
                  path.c_str());
}

void check_sample_shape(Net& net, const Source& source, const ConfigNode& where) {
  const std::string& input = net.input_names().front();
  const std::string expected = shape_str(net.input_sample_shape(input));
  if (source.sample_shape() != net.input_sample_shape(input))
    where.fail("the data's examples have shape " + shape_str(source.sample_shape()) + " but the model's input '" +
               input + "' expects " + expected +
               (where.get_string("source", "") == "synthetic"
                    ? " (synthetic data: --set '" + where.path() + ".shape=" + expected + "')"
                    : ""));
  if (net.input_names().size() < 2)
    where.fail("the model needs a second input for the labels (e.g. inputs: {data: [...], label: []})");
  check_labels(net, source, where);
}

void feed_batch(Net& net, Loader& loader, Tensor& staged_data, Tensor& staged_labels) {
  Tensor& data = net.blob(net.input_names()[0]).value;
  Tensor& labels = net.blob(net.input_names()[1]).value;
  if (!data.is_cuda()) {
    loader.next(data, labels);
    return;
  }
  loader.next(staged_data, staged_labels);
  data.copy_from(staged_data);
  labels.copy_from(staged_labels);
}

EvalResult evaluate(Net& net, Loader& loader, int64_t max_batches) {
  const int64_t train_batch = net.batch();
  int64_t batches = max_batches > 0 ? max_batches : loader.batches_per_epoch();
  loader.seek({});
  RunContext ctx{Phase::test, nullptr, net.device()};
  EvalResult r;
  Tensor data, labels;
  for (int64_t b = 0; b < batches; ++b) {
    loader.next(data, labels);
    int64_t n = data.dim(0);
    net.reshape(n);
    net.blob(net.input_names()[0]).value.copy_from(data);
    net.blob(net.input_names()[1]).value.copy_from(labels);
    r.loss += net.forward(ctx) * n;
    for (const auto& m : net.metric_outputs()) r.metrics[m] += net.blob(m).value.item(0) * n;
    r.examples += n;
  }
  r.loss /= std::max<int64_t>(1, r.examples);
  for (auto& [name, v] : r.metrics) v /= std::max<int64_t>(1, r.examples);
  net.reshape(train_batch);
  return r;
}

Trainer::Trainer(TrainConfig config, TrainOptions options)
    : config_(std::move(config)), options_(std::move(options)), rng_(config_.seed) {
  set_num_threads(config_.threads);
  if (options_.world) {
    rank_ = options_.world->rank();
    world_size_ = options_.world->size();
    config_.device = dist::rank_device(*options_.world, config_.device, config_.device_index_given);
  }
  choose_cpu_bf16_kernels();
  net_ = std::make_unique<Net>(config_.model, config_.train_data.batch_size, config_.device);
  if (config_.deterministic) device_memory::set_deterministic(config_.device, *config_.deterministic);
  net_->set_precision(config_.precision);
  net_->init_params(config_.seed);
  // Emulated compute waits each layer's profiled time, ReLUs' included, so
  // its net keeps its ReLU layers; training reads no blob before a ReLU.
  if (!options_.emulate_compute.empty())
    emulated_ =
        dist::emulate_compute(*net_, options_.emulate_compute, options_.emulate_scale, config_.train_data.batch_size);
  else
    net_->fuse_relus();
  solver_ = std::make_unique<Solver>(config_.solver);

  if (!options_.feed) {
    auto train_source = make_source(config_.train_data.node, config_.base_dir);
    check_sample_shape(*net_, *train_source, config_.train_data.node);
    LoaderConfig lc;
    lc.batch_size = config_.train_data.batch_size;
    lc.shuffle = config_.train_data.shuffle;
    lc.seed = config_.seed;
    lc.drop_last = true;
    lc.rank = rank_;
    lc.world_size = world_size_;
    read_loader_keys(config_.train_data.node, lc);
    // A CUDA run's images decode on the GPU where nvJPEG can; the choice is said.
    if (config_.device.is_cuda() && train_source->image_transform()) {
      const NvjpegLibrary nvjpeg = load_nvjpeg();
      ImageDecoderChoice choice = choose_image_decoder(true, device_memory::cuda_device_count(), nvjpeg);
#ifdef POSEIDON_GPU_IMAGE_FEED
      if (choice.gpu) {
        lc.encoded = true;
        try {
          train_loader_ = std::make_unique<Loader>(train_source, lc);
          gpu_feed_ = std::make_unique<GpuImageFeed>(nvjpeg, *train_loader_);
          gpu_decoding_ = true;
        } catch (const Error& e) {
          choice = {false, "image decoding: CPU (libjpeg-turbo): nvJPEG did not start: " + std::string(e.what())};
          train_loader_.reset();
          lc.encoded = false;
        }
      }
#endif
      if (rank_ == 0 && !options_.quiet) std::printf("%s\n", choice.line.c_str());
    }
    if (!train_loader_) train_loader_ = std::make_unique<Loader>(train_source, lc);
  }
  if (config_.test_data) {
    auto test_source = make_source(config_.test_data->node, config_.base_dir);
    check_sample_shape(*net_, *test_source, config_.test_data->node);
    LoaderConfig tc;
    tc.batch_size = config_.test_data->batch_size;
    tc.shuffle = config_.test_data->shuffle;
    tc.seed = config_.seed;
    tc.rank = rank_;
    tc.world_size = world_size_;
    read_loader_keys(config_.test_data->node, tc);
    test_loader_ = std::make_unique<Loader>(test_source, tc);
  }
  if (!options_.weights.empty()) load_checkpoint(options_.weights, *net_, nullptr);
  if (!options_.resume.empty()) {
    if (options_.feed)
      throw Error(options_.resume +
                  ": a run fed batches by its caller cannot resume (only data.train's loader "
                  "can be positioned)");
    restore(options_.resume);
  }
  if (world_size_ > 1) {
    dist::SessionOptions session;
    session.config = config_.dist;
    session.first_iteration = iter_;
    session.compression_state = std::move(compression_state_);
    // Emulated gradients are not computed, so there is nothing to check;
    // SFB rebuilds run at the profiled device's rate, not this machine's.
    session.check_finite = config_.solver.check_finite && !emulated_;
    if (emulated_) {
      session.compute = emulated_->exchange_compute();
      if (emulated_->device.gemm_gflops > 0) session.gemm_gflops = emulated_->device.gemm_gflops;
    }
    std::string origin;
    const dist::SessionOptions planned = plan_origin(origin);
    session.recorded_link = planned.recorded_link;
    session.pinned_plan = planned.pinned_plan;
    session.pinned_plan_path = planned.pinned_plan_path;
    session_ = std::make_unique<dist::Session>(*net_, config_.model, *solver_, *options_.world, std::move(session));
    plan_said_ = origin;
    // Written down, so that the next start of this config plans the same.
    if (rank_ == 0 && session_->link()) dist::write_plan_file(plan_record_path(), session_->record());
  }
  if (!options_.timeline.empty()) {
    timeline_ = std::make_unique<dist::Timeline>(rank_);
    if (session_) session_->set_timeline(timeline_.get());
  }
}

Trainer::~Trainer() = default;

void Trainer::next_train_batch() {
  Tensor& data = net_->blob(net_->input_names()[0]).value;
  Tensor& labels = net_->blob(net_->input_names()[1]).value;
#ifdef POSEIDON_GPU_IMAGE_FEED
  if (gpu_feed_) {
    gpu_feed_->next(data, labels);
    return;
  }
#endif
  if (!options_.feed) {
    if (!net_->device().is_cuda()) {
      feed_batch(*net_, *train_loader_, staged_data_, staged_labels_);
      return;
    }
    train_loader_->next(staged_data_, staged_labels_);
    upload_batch();
    return;
  }
  if (!data.is_cuda()) {
    options_.feed->next(data, labels);
    return;
  }
  staged_data_.resize(data.shape());
  staged_labels_.resize(labels.shape());
  options_.feed->next(staged_data_, staged_labels_);
  upload_batch();
}

void Trainer::upload_batch() {
  Tensor& data = net_->blob(net_->input_names()[0]).value;
  Tensor& labels = net_->blob(net_->input_names()[1]).value;
  if (!data_upload_) {
    data_upload_ = std::make_unique<device_memory::Uploader>(data.device());
    labels_upload_ = std::make_unique<device_memory::Uploader>(labels.device());
  }
  data_upload_->upload(data.data(), staged_data_.data(), data.numel());
  labels_upload_->upload(labels.data(), staged_labels_.data(), labels.numel());
}

int64_t Trainer::skipped_images() const {
  int64_t skipped = train_loader_ ? train_loader_->skipped() : 0;
#ifdef POSEIDON_GPU_IMAGE_FEED
  if (gpu_feed_) skipped += gpu_feed_->skipped();
#endif
  return skipped;
}

LoaderPosition Trainer::train_position() const {
  return options_.feed ? options_.feed->position() : train_loader_->position();
}

std::string Trainer::plan_record_path() const {
  return (std::filesystem::path(config_.output_dir) / "plan.json").string();
}

dist::SessionOptions Trainer::plan_origin(std::string& said) {
  dist::SessionOptions out;
  if (!config_.dist.plan_file.empty()) {
    std::filesystem::path path(config_.dist.plan_file);
    if (path.is_relative()) path = std::filesystem::path(config_.base_dir) / path;
    out.pinned_plan_path = path.string();
    out.pinned_plan = dist::read_plan_file(out.pinned_plan_path);
    said = "schemes pinned by " + out.pinned_plan_path;
    return out;
  }
  if (config_.dist.scheme != dist::SchemeChoice::hybrid) return out;
  if (options_.replan) {
    said = "probed anew (--replan)";
    return out;
  }
  if (resumed_link_) {
    out.recorded_link = resumed_link_;
    said = "figures recorded in " + options_.resume + " (--replan probes anew)";
    return out;
  }
  const std::string record = plan_record_path();
  if (rank_ == 0 && std::filesystem::is_regular_file(record)) {
    const dist::PlanRecord earlier = dist::read_plan_file(record);
    if (earlier.model == net_->name()) {
      out.recorded_link = earlier.link;
      said = "figures recorded in " + record + " by an earlier start (--replan probes anew)";
      return out;
    }
  }
  const dist::DistConfig& d = config_.dist;
  if (d.bandwidth_gbps && d.latency_us && d.gemm_gflops)
    said = "figures given by the config";
  else if (d.bandwidth_gbps || d.latency_us || d.gemm_gflops)
    said = "probed at start where the config gives no figure";
  else
    said = "probed at start";
  return out;
}

EvalResult Trainer::test() {
  if (!session_) return evaluate(*net_, *test_loader_, config_.test_iters);
  // Each rank tests its shard of the test set; the sums are combined.
  session_->average_buffers();
  session_->bring_net_current();
  const EvalResult local = evaluate(*net_, *test_loader_, config_.test_iters);
  const double n = static_cast<double>(local.examples);
  std::vector<double> sums = {local.loss * n, n};
  for (const auto& [name, v] : local.metrics) sums.push_back(v * n);
  sums = session_->sum_over_ranks(sums);
  EvalResult all;
  all.examples = static_cast<int64_t>(sums[1]);
  const double total = std::max(1.0, sums[1]);
  all.loss = sums[0] / total;
  size_t i = 2;
  for (const auto& [name, v] : local.metrics) all.metrics[name] = sums[i++] / total;
  return all;
}

EvalResult Trainer::run() {
  std::optional<MetricsLog> log;
  if (rank_ == 0) log.emplace((std::filesystem::path(config_.output_dir) / "metrics.jsonl").string());
  auto write_log = [&](const nlohmann::json& record) {
    if (log) log->write(record);
  };
  const int64_t max_iter = config_.solver.max_iter;
  Progress progress(iter_, max_iter, config_.display, options_.quiet || rank_ != 0);
  // Alone, updates are held until the gradients are checked; in an MPI job
  // the scheduler checks each gradient before it leaves the rank.
  // Emulated, the updates are waits and gradients are not computed, so not checked.
  const bool check_finite = config_.solver.check_finite && !emulated_;
  const bool hold_updates = check_finite && !session_;
  LocalGradSink local_sink(*solver_, hold_updates);
  std::optional<dist::EmulatedUpdateSink> emulated_sink;
  if (emulated_) emulated_sink.emplace(emulated_->device);
  GradSink& alone = emulated_sink ? static_cast<GradSink&>(*emulated_sink) : local_sink;
  GradSink& untraced = session_ ? session_->sink() : alone;
  std::optional<dist::TracingSink> traced;
  if (timeline_) traced.emplace(untraced, *timeline_, config_.device, !session_ && !hold_updates);
  GradSink& sink = traced ? static_cast<GradSink&>(*traced) : untraced;
  // Forward waits at the scheduler's gates; alone it needs no gate unless traced.
  GradSink* gate = traced || session_ ? &sink : nullptr;
  std::string comm_text;
  if (emulated_) {
    char line[320];
    std::snprintf(line, sizeof line,
                  "emulated compute: %s x %g, %.1f ms forward and backward and %.1f ms of updates per iteration",
                  options_.emulate_compute.c_str(), options_.emulate_scale, emulated_->layers_s * 1e3,
                  emulated_->device.update_s(net_->num_learnable()) * 1e3);
    progress.note(line);
  }
  if (session_) {
    progress.note("dist: " + session_->describe() + (plan_said_.empty() ? "" : "; plan: " + plan_said_));
    if (const auto& link = session_->link())
      write_log({{"type", "plan"},
                 {"bandwidth_gbps", link->bandwidth_gbps},
                 {"latency_us", link->latency_us},
                 {"gemm_gflops", link->gemm_gflops},
                 {"origin", plan_said_},
                 {"record", plan_record_path()}});
  }
  // Tests, checkpoints and data waits on their timeline lanes; tests and
  // checkpoints are not training time for the progress line's rate.
  auto on_lane = [&](int lane, const char* name, const auto& work) {
    const auto begin = dist::Timeline::Clock::now();
    work();
    if (timeline_) timeline_->add(name, name, lane, begin, dist::Timeline::Clock::now());
  };
  RunSummary summary;
  auto checkpoint = [&](const std::string& tag) {
    progress.pause();
    on_lane(dist::Timeline::checkpoint, "checkpoint", [&] { save(checkpoint_path(tag)); });
    progress.note("checkpoint " + checkpoint_path(tag));
    summary.add_checkpoint(checkpoint_path(tag));
    progress.resume();
  };
  EvalResult last;
  auto run_test = [&] {
    progress.pause();
    on_lane(dist::Timeline::test, "test", [&] { last = test(); });
    summary.add_test(iter_, last.loss, last.metrics);
    nlohmann::json rec = {{"type", "test"}, {"iter", iter_}, {"loss", last.loss}, {"examples", last.examples}};
    std::ostringstream line;
    line << "test at iter " << iter_ << ": loss " << last.loss;
    for (const auto& [k, v] : last.metrics) {
      rec[k] = v;
      line << "  " << k << " " << v;
    }
    line << "  (" << last.examples << " examples)";
    write_log(rec);
    progress.note(line.str());
    progress.resume();
  };

  const auto start = std::chrono::steady_clock::now();
  // Alone with held updates, each iteration's loss and finite verdict are
  // read after the next iteration is issued, so that a GPU is not waited for
  // between iterations; an iteration after which something is reported or
  // saved (Step::boundary) is read at once. A non-finite iteration found
  // late has had its updates, and those of the iteration issued after it,
  // turned into nothing by the finite guard (core/step_gate.h), and is run
  // again where the guard cannot say at once where it turned non-finite (a
  // GPU). A caller's feed cannot give a batch again: read at once.
  const bool read_late = hold_updates && train_loader_;
  std::optional<StepGate> step_gate;
  if (read_late) step_gate.emplace(*net_, *solver_);
  // Alone on a GPU and read late, the steady steps run as a CUDA graph
  // (core/graphed_step.h); the log says why not where they cannot.
  CaptureFacts capture_facts = net_capture_facts(*net_, config_.cuda_graph);
  capture_facts.distributed = session_ != nullptr;
  capture_facts.emulated = emulated_.has_value();
  capture_facts.traced = traced.has_value();
  capture_facts.reads_late = read_late;
  GraphedStep graphed(config_.device, capture_facts, {&rng_, solver_.get(), &local_sink});
  auto note_graph = [&] {
    if (const std::string note = graphed.take_note(); !note.empty()) progress.note(note);
  };
  note_graph();
  // An error in the data of iteration `s`, named as such.
  auto data_error = [&](const Step& s, const Error& e) {
    return Error(config_.file + ": iteration " + std::to_string(s.iter + 1) + " (epoch " + std::to_string(s.epoch) +
                 ") of data.train: " + e.what());
  };
  // The buffers each iteration starts from, by the parity of its number
  // (forward updates running statistics before the guard looks).
  std::array<Tensor, 2> buffers_before;
  if (hold_updates)
    for (Tensor& t : buffers_before) t = Tensor(net_->flat_buffers().shape(), config_.device);
  auto issue = [&](int64_t k) {
    Step s;
    s.iter = k;
    s.position = train_position();
    s.epoch = s.position.epoch;
    s.rng_before = rng_;
    if (hold_updates) buffers_before[k % 2].copy_from(net_->flat_buffers());
    // A caller's feed, and the GPU's decoding, are waited for all the time they take to give a batch.
    const auto data_begin = std::chrono::steady_clock::now();
    const double waited_before = train_loader_ ? train_loader_->waited_s() : 0;
    on_lane(dist::Timeline::data, "batch", [&] { next_train_batch(); });
    s.data_wait_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - data_begin).count();
    if (train_loader_ && !gpu_decoding_) s.data_wait_s = train_loader_->waited_s() - waited_before;
    // The scheduler sets the solver's iteration itself, on its own thread.
    if (!session_) solver_->set_iteration(k);
    s.lr = config_.solver.lr.at(k);
    RunContext ctx{Phase::train, &rng_, config_.device};
    try {
      if (graphed.captures()) {
        graphed.run([&] {
          net_->run_forward(ctx, gate);
          net_->backward(ctx, sink);
          step_gate->close_on_device(local_sink);
        });
      } else if (read_late) {
        net_->run_forward(ctx, gate);
        net_->backward(ctx, sink);
      } else if (std::isfinite(s.loss = net_->forward(ctx, gate))) {
        net_->backward(ctx, sink);
        if (hold_updates) s.bad_gradient = find_non_finite_gradient(*net_);
      }
    } catch (const ConfigError&) {
      throw;
    } catch (const dist::CommError&) {
      throw;  // about the job, not the data
    } catch (const Error& e) {
      throw data_error(s, e);
    }
    if (graphed.captures()) {
      step_gate->closed(k % 2);
      note_graph();
    } else if (read_late) {
      on_lane(dist::Timeline::update, "update", [&] { step_gate->close(k % 2, local_sink); });
    } else {
      s.finite = std::isfinite(s.loss) && !s.bad_gradient;
      if (hold_updates && s.finite) on_lane(dist::Timeline::update, "update", [&] { local_sink.apply_held(); });
    }
    const int64_t done = k + 1;
    s.display = config_.display > 0 && (done % config_.display == 0 || done == max_iter);
    s.test = test_loader_ && config_.test_interval > 0 && done % config_.test_interval == 0 && done < max_iter;
    s.snapshot = config_.snapshot_interval > 0 && done % config_.snapshot_interval == 0;
    if (read_late) s.signal = stop_signal();
    return s;
  };
  // Reports iteration `s` (iter_ iterations before it); true when a stop
  // signal ended training after it.
  auto settle = [&](Step& s, bool later_issued) {
    if (read_late) {
      try {
        net_->check_forward();
      } catch (const Error& e) {
        throw data_error(s, e);
      }
      const StepGate::Reading reading = step_gate->read(s.iter % 2);
      s.loss = reading.loss;
      s.finite = reading.finite;
      s.what = reading.what;
    }
    if (!s.finite) {
      progress.finish();
      const Tensor& before = buffers_before[s.iter % 2];
      if (hold_updates) net_->flat_buffers().copy_from(before);
      if (s.what.empty())
        s.what = read_late        ? repeat_non_finite(s, before, local_sink, later_issued)
                 : s.bad_gradient ? s.bad_gradient->describe("non-finite gradient")
                                  : describe_non_finite_loss(s.loss, *net_);
      stop_non_finite(s.what, s.epoch, s.position, s.rng_before);
    }
    iter_ = s.iter + 1;
    progress.add_data_wait(s.data_wait_s);
    std::optional<dist::CommStats> comm;
    if (session_ && s.display) {
      session_->sync();  // the record then covers whole iterations, the last one's transfers included
      comm = session_->take_stats();
      comm_text = comm_summary(*comm);
    }
    progress.step(iter_, s.epoch, s.loss, s.lr, net_->batch() * world_size_, comm_text);
    if (s.display) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      nlohmann::json record = {
          {"type", "train"},
          {"iter", iter_},
          {"epoch", s.epoch},
          {"loss", s.loss},
          {"loss_avg", progress.smoothed_loss()},
          {"lr", s.lr},
          {"images_per_sec", progress.images_per_sec()},
          {"elapsed_s", elapsed},
          {"unix_time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
          {"skipped_images", skipped_images()}};
      if (comm) {
        const double n = static_cast<double>(std::max<int64_t>(1, comm->iterations));
        record["comm_bytes_sent"] = comm->bytes_sent / n;
        record["comm_bytes_received"] = comm->bytes_received / n;
        record["comm_s"] = comm->comm_s / n;
        record["comm_wait_s"] = comm->wait_s / n;
        record["comm_hidden_share"] = comm->hidden_share();
      }
      write_log(record);
    }
    if (s.test) {
      run_test();
      graphed.restart();  // the test may have moved the blobs (another batch)
    }
    if (s.snapshot && iter_ < max_iter) checkpoint("iter_" + std::to_string(iter_));
    // A signal (catch_stop_signals) stops every rank here together, with one
    // checkpoint. Read late, an iteration saw it as it was issued: one
    // issued after it must not be overtaken by the checkpoint.
    const int signal = read_late ? s.signal : stop_signal();
    if ((session_ ? session_->agree_to_stop(signal != 0) : signal != 0) && iter_ < max_iter) {
      const std::string tag = "iter_" + std::to_string(iter_);
      if (!s.snapshot) checkpoint(tag);
      progress.finish();
      progress.note(std::string("stopped at iteration ") + std::to_string(iter_) + " by " +
                    (signal ? stop_signal_name(signal) : "a signal to another rank") + "; checkpoint " +
                    checkpoint_path(tag) + " (--resume " + checkpoint_path(tag) + " continues)");
      write_log({{"type", "stopped"}, {"iter", iter_}, {"checkpoint", checkpoint_path(tag)}});
      return true;
    }
    return false;
  };
  std::optional<Step> pending;  // issued, not yet read: never a boundary, so never the last
  while (iter_ < max_iter) {
    Step s = issue(iter_ + (pending ? 1 : 0));
    if (pending) {
      Step earlier = *std::exchange(pending, std::nullopt);
      settle(earlier, true);
    }
    if (read_late && !s.boundary(max_iter))
      pending = std::move(s);
    else if (settle(s, false))
      return last;
  }
  progress.finish();
  progress.pause();  // training time ends with the last iteration
  if (config_.final_checkpoint)
    checkpoint("final");
  else
    summary.set_no_final_checkpoint("train.final_checkpoint is false");
  if (test_loader_) run_test();
  if (timeline_) {
    const std::string path = dist::Timeline::path_for_rank(options_.timeline, rank_, world_size_);
    timeline_->write(path);
    progress.note("timeline " + path);
  }
  const nlohmann::json record = summary.record(progress.totals());
  write_log(record);
  for (const std::string& line : RunSummary::lines(record)) progress.note(line);
  return last;
}

}  // namespace poseidon
