// Loader: deterministic epoch order, sharding, and worker threads filling a
// bounded window of upcoming batches.
#include "data/loader.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>

#include "core/error.h"

namespace poseidon {

void read_loader_keys(const ConfigNode& data, LoaderConfig& config) {
  config.workers = static_cast<int>(data.get_int("workers", config.workers));
  if (config.workers < 1 || config.workers > 256) data.child("workers").fail("expected 1 to 256 threads");
  config.prefetch = static_cast<int>(data.get_int("prefetch", config.prefetch));
  if (config.prefetch < 1 || config.prefetch > 1024) data.child("prefetch").fail("expected 1 to 1024 batches");
}

Loader::Loader(std::shared_ptr<Source> source, LoaderConfig config) : source_(std::move(source)), config_(config) {
  POSEIDON_REQUIRE(config_.batch_size > 0) << "batch size must be positive";
  POSEIDON_REQUIRE(config_.world_size >= 1 && config_.rank >= 0 && config_.rank < config_.world_size)
      << "bad rank " << config_.rank << " of " << config_.world_size;
  POSEIDON_REQUIRE(config_.workers >= 1) << "the loader needs at least one worker thread";
  POSEIDON_REQUIRE(config_.prefetch >= 1) << "the loader must prefetch at least one batch";
  POSEIDON_REQUIRE(batches_per_epoch() > 0)
      << "the data source has " << source_->size() << " examples, too few for one batch of " << config_.batch_size
      << " on each of " << config_.world_size << " ranks";
  start();
}

Loader::~Loader() { stop(); }

int64_t Loader::batches_per_epoch() const {
  int64_t shard = source_->size() / config_.world_size;
  return config_.drop_last ? shard / config_.batch_size : (shard + config_.batch_size - 1) / config_.batch_size;
}

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> own = source_->rank_order(epoch, config_.seed, config_.rank, config_.world_size, config_.shuffle);
  if (!own.empty()) {
    POSEIDON_CHECK(static_cast<int64_t>(own.size()) == source_->size() / config_.world_size)
        << "a source's rank order holds " << own.size() << " examples";
    return own;
  }
  std::vector<int64_t> order(source_->size());
  std::iota(order.begin(), order.end(), 0);
  if (config_.shuffle) {
    std::mt19937_64 rng(config_.seed * 1000003ull + static_cast<uint64_t>(epoch));
    // Fisher-Yates with our own index draw: std::shuffle's output is library-specific.
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  }
  int64_t shard = source_->size() / config_.world_size;
  std::vector<int64_t> mine;
  mine.reserve(shard);
  for (int64_t i = 0; i < shard; ++i) mine.push_back(order[i * config_.world_size + config_.rank]);
  return mine;
}

uint64_t Loader::example_seed(int64_t epoch, int64_t index) const {
  return (config_.seed * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(epoch) << 40) ^ static_cast<uint64_t>(index);
}

Loader::Batch* Loader::claimable() {
  for (auto& b : pending_)
    if (b->claimed < b->count()) return b.get();
  if (static_cast<int>(pending_.size()) >= config_.prefetch) return nullptr;
  if (order_epoch_ != next_open_.epoch) {
    order_ = epoch_order(next_open_.epoch);
    order_epoch_ = next_open_.epoch;
  }
  auto b = std::make_unique<Batch>();
  b->at = next_open_;
  const int64_t begin = next_open_.batch * config_.batch_size;
  const int64_t end = std::min<int64_t>(begin + config_.batch_size, static_cast<int64_t>(order_.size()));
  b->indices.assign(order_.begin() + begin, order_.begin() + end);
  b->data = std::make_unique_for_overwrite<float[]>(b->count() * shape_numel(source_->sample_shape()));
  b->labels.resize(b->count());
  if (config_.encoded) {
    b->encoded.resize(b->indices.size());
    b->names.resize(b->indices.size());
  }
  if (++next_open_.batch >= batches_per_epoch()) {
    next_open_.batch = 0;
    ++next_open_.epoch;
  }
  pending_.push_back(std::move(b));
  return pending_.back().get();
}

void Loader::work() {
  const int64_t sample = shape_numel(source_->sample_shape());
  std::unique_lock lock(mutex_);
  for (;;) {
    Batch* b = nullptr;
    cv_.wait(lock, [&] { return stopping_ || (b = claimable()) != nullptr; });
    if (stopping_) return;
    const int64_t i = b->claimed++;
    const int64_t index = b->indices[i];
    const uint64_t seed = example_seed(b->at.epoch, index);
    lock.unlock();
    // Outside the lock: workers write disjoint slices of the batch.
    int64_t skipped = 0;
    float label = 0;
    std::exception_ptr error;
    try {
      int64_t encoded_label = 0;
      std::vector<uint8_t> bytes;
      std::string name;
      if (config_.encoded && source_->read_encoded(index, bytes, encoded_label, name)) {
        label = static_cast<float>(encoded_label);
        b->encoded[i] = std::move(bytes);  // this worker's own slot
        b->names[i] = std::move(name);
      } else {
        label = static_cast<float>(source_->read_skipping(index, b->data.get() + i * sample, seed, skipped));
      }
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    b->labels[i] = label;
    b->skipped += skipped;
    if (error && (b->error_at < 0 || i < b->error_at)) {
      b->error = error;
      b->error_at = i;
    }
    if (++b->done == b->count()) cv_.notify_all();
  }
}

void Loader::start() {
  stopping_ = false;
  next_open_ = position_;
  for (int w = 0; w < config_.workers; ++w) workers_.emplace_back([this] { work(); });
}

void Loader::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  for (auto& w : workers_) w.join();
  workers_.clear();
  pending_.clear();
}

void Loader::seek(LoaderPosition position) {
  stop();
  position_ = position;
  start();
}

std::unique_ptr<Loader::Batch> Loader::take() {
  std::unique_ptr<Batch> b;
  {
    std::unique_lock lock(mutex_);
    const auto asked = std::chrono::steady_clock::now();
    cv_.wait(lock, [&] { return !pending_.empty() && pending_.front()->done == pending_.front()->count(); });
    waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
    if (pending_.front()->error) std::rethrow_exception(pending_.front()->error);
    b = std::move(pending_.front());
    pending_.pop_front();
    cv_.notify_all();
  }
  POSEIDON_CHECK(b->at.epoch == position_.epoch && b->at.batch == position_.batch) << "loader out of order";
  skipped_ += b->skipped;
  if (++position_.batch >= batches_per_epoch()) {
    position_.batch = 0;
    ++position_.epoch;
  }
  return b;
}

void Loader::next(Tensor& data, Tensor& labels) {
  POSEIDON_CHECK(!config_.encoded) << "a loader of encoded examples is read with next_encoded()";
  std::unique_ptr<Batch> b = take();
  Shape shape = {b->count()};
  for (int64_t d : source_->sample_shape()) shape.push_back(d);
  data.resize(shape);
  labels.resize({b->count()});
  std::memcpy(data.data(), b->data.get(), data.numel() * sizeof(float));
  std::memcpy(labels.data(), b->labels.data(), b->labels.size() * sizeof(float));
}

void Loader::next_encoded(EncodedBatch& batch) {
  POSEIDON_CHECK(config_.encoded) << "next_encoded() needs LoaderConfig::encoded";
  std::unique_ptr<Batch> b = take();
  batch.seeds.clear();
  for (int64_t index : b->indices) batch.seeds.push_back(example_seed(b->at.epoch, index));
  batch.indices = std::move(b->indices);
  batch.bytes = std::move(b->encoded);
  batch.names = std::move(b->names);
  batch.labels = std::move(b->labels);
  batch.decoded = std::move(b->data);
}

}  // namespace poseidon
