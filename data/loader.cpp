// Loader: deterministic epoch order, sharding and a prefetch thread.
#include "data/loader.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/error.h"

namespace poseidon {

Loader::Loader(std::shared_ptr<Source> source, LoaderConfig config)
    : source_(std::move(source)), config_(config) {
  POSEIDON_REQUIRE(config_.batch_size > 0) << "batch size must be positive";
  POSEIDON_REQUIRE(config_.world_size >= 1 && config_.rank >= 0 && config_.rank < config_.world_size)
      << "bad rank " << config_.rank << " of " << config_.world_size;
  POSEIDON_REQUIRE(batches_per_epoch() > 0)
      << "the data source has " << source_->size() << " examples, too few for one batch of "
      << config_.batch_size << " on each of " << config_.world_size << " ranks";
  start();
}

Loader::~Loader() { stop(); }

int64_t Loader::batches_per_epoch() const {
  int64_t shard = source_->size() / config_.world_size;
  return config_.drop_last ? shard / config_.batch_size
                           : (shard + config_.batch_size - 1) / config_.batch_size;
}

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const {
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

Loader::Batch Loader::produce(LoaderPosition at) const {
  std::vector<int64_t> order = epoch_order(at.epoch);
  int64_t begin = at.batch * config_.batch_size;
  int64_t count = std::min<int64_t>(config_.batch_size, static_cast<int64_t>(order.size()) - begin);
  const int64_t sample = shape_numel(source_->sample_shape());
  Batch b;
  b.at = at;
  b.count = count;
  b.data.resize(count * sample);
  b.labels.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    int64_t idx = order[begin + i];
    uint64_t seed = (config_.seed * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(at.epoch) << 40) ^
                    static_cast<uint64_t>(idx);
    b.labels[i] = static_cast<float>(source_->read(idx, b.data.data() + i * sample, seed));
  }
  return b;
}

void Loader::run(LoaderPosition at) {
  try {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || static_cast<int>(queue_.size()) < config_.prefetch; });
        if (stopping_) return;
      }
      Batch b = produce(at);
      if (++at.batch >= batches_per_epoch()) {
        at.batch = 0;
        ++at.epoch;
      }
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(b));
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    cv_.notify_all();
  }
}

void Loader::start() {
  stopping_ = false;
  worker_ = std::thread([this, from = position_] { run(from); });
}

void Loader::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  queue_.clear();
}

void Loader::seek(LoaderPosition position) {
  stop();
  position_ = position;
  error_ = nullptr;
  start();
}

void Loader::next(Tensor& data, Tensor& labels) {
  Batch b;
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !queue_.empty() || error_; });
    if (queue_.empty()) std::rethrow_exception(error_);
    b = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
  }
  POSEIDON_CHECK(b.at.epoch == position_.epoch && b.at.batch == position_.batch) << "loader out of order";
  Shape shape = {b.count};
  for (int64_t d : source_->sample_shape()) shape.push_back(d);
  data.resize(shape);
  labels.resize({b.count});
  std::memcpy(data.data(), b.data.data(), b.data.size() * sizeof(float));
  std::memcpy(labels.data(), b.labels.data(), b.labels.size() * sizeof(float));
  if (++position_.batch >= batches_per_epoch()) {
    position_.batch = 0;
    ++position_.epoch;
  }
}

}  // namespace poseidon
