// The Trainer's checkpoints: where they go, the metadata that lets a run
// resume where it stopped (iteration, loader position, RNG, rank count and
// batch size, the link figures it planned with, the CPU's bf16 kernels), and
// their save and restore.
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "core/checkpoint.h"
#include "core/safetensors.h"
#include "layers/dnnl_support.h"
#include "tools/cli/trainer.h"

namespace poseidon {

std::string Trainer::checkpoint_path(const std::string& tag) const {
  return (std::filesystem::path(config_.output_dir) / (tag + ".safetensors")).string();
}

std::map<std::string, std::string> Trainer::checkpoint_metadata(int64_t iter, const LoaderPosition& pos,
                                                                const std::mt19937_64& rng) const {
  std::ostringstream rng_text;
  rng_text << rng;
  std::map<std::string, std::string> meta = {{"format", "poseidon-checkpoint-1"},
                                             {"model", net_->name()},
                                             {"iteration", std::to_string(iter)},
                                             {"loader_epoch", std::to_string(pos.epoch)},
                                             {"loader_batch", std::to_string(pos.batch)},
                                             {"world_size", std::to_string(world_size_)},
                                             {"batch_size", std::to_string(config_.train_data.batch_size)},
                                             {"rng", rng_text.str()}};
  if (session_ && session_->link()) meta["dist_link"] = dist::link_text(*session_->link());
  // Those of any bf16 layer, a layer's own precision key included.
  if (!config_.device.is_cuda()) meta["cpu_bf16_kernels"] = dnnl_runs_bf16_kernels() ? "onednn" : "float32";
  return meta;
}

void Trainer::choose_cpu_bf16_kernels() {
  // The two kernels' products differ in their last bits: a resumed run
  // takes those it resumes (a measurement under load may choose otherwise),
  // and every rank takes rank 0's.
  adopt_cpu_bf16_kernels(std::nullopt);  // an earlier Trainer's in this process
  bool onednn = dnnl_runs_bf16_kernels();
  if (!options_.resume.empty() && !std::getenv("POSEIDON_CPU_BF16_KERNELS")) {
    const auto meta = read_safetensors(options_.resume, [](const std::string&) { return true; }).metadata;
    if (auto it = meta.find("cpu_bf16_kernels"); it != meta.end()) {
      if (it->second != "onednn" && it->second != "float32")
        throw Error(options_.resume + ": corrupt training metadata ('cpu_bf16_kernels' is '" + it->second +
                    "', expected onednn or float32)");
      onednn = it->second == "onednn";
    }
  }
  if (options_.world) onednn = options_.world->value_of_rank_zero(onednn) != 0;
  adopt_cpu_bf16_kernels(onednn);
}

void Trainer::save(const std::string& path) {
  if (session_) {
    session_->average_buffers();
    session_->bring_net_current();
    const Solver full = session_->solver_snapshot();
    session_->save_with_compression_state([&](const std::vector<StreamedTensor>& compression) {
      std::filesystem::create_directories(std::filesystem::path(path).parent_path());
      save_checkpoint(path, *net_, &full, checkpoint_metadata(iter_, train_position(), rng_), compression);
    });
    return;
  }
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  save_checkpoint(path, *net_, solver_.get(), checkpoint_metadata(iter_, train_position(), rng_));
}

void Trainer::restore(const std::string& path) {
  auto meta = load_checkpoint(path, *net_, solver_.get(), &compression_state_);
  auto get = [&](const std::string& key) -> std::string {
    auto it = meta.find(key);
    if (it == meta.end()) throw Error(path + ": not a training checkpoint (metadata '" + key + "' missing)");
    return it->second;
  };
  // Whole decimal numbers only: the loader trusts them as positions.
  auto count = [&](const std::string& key) {
    const std::string text = get(key);
    int64_t v = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < 0)
      throw Error(path + ": corrupt training metadata ('" + key + "' is '" + text + "', expected a count)");
    return v;
  };
  const int64_t iter = count("iteration");
  LoaderPosition pos{count("loader_epoch"), count("loader_batch")};
  // Rank r reads examples r, r + P, r + 2P, ... of each epoch's order, so
  // `batch` batches of K on P ranks consumed the first batch * P * K
  // examples. With another rank count or batch size the run continues at the
  // batch that starts there (rounded down: a few examples are seen twice
  // rather than skipped).
  if (meta.count("world_size") && meta.count("batch_size")) {
    const int64_t saved = count("world_size") * count("batch_size");
    if (saved < 1) throw Error(path + ": corrupt training metadata (world_size or batch_size is 0)");
    pos.batch = pos.batch * saved / (world_size_ * config_.train_data.batch_size);
  }
  // One batch per iteration: a run cannot be further into the data than its iteration count.
  if (pos.epoch > iter) throw Error(path + ": corrupt training metadata (loader epoch beyond the iteration)");
  if (pos.batch >= train_loader_->batches_per_epoch())
    throw Error(path + ": loader position beyond the data set (was it trained on other data?)");
  if (meta.count("dist_link")) {
    resumed_link_ = dist::parse_link_text(meta.at("dist_link"));
    if (!resumed_link_) throw Error(path + ": corrupt training metadata ('dist_link' is not link figures)");
  }
  std::istringstream rng(get("rng"));
  rng >> rng_;
  if (rng.fail()) throw Error(path + ": corrupt RNG state in metadata");
  iter_ = iter;
  train_loader_->seek(pos);
}

}  // namespace poseidon
