// Loader: batches from a Source with seeded per-epoch shuffling, optional
// per-rank sharding, and a prefetch thread that prepares the next batches
// while the current one trains. Its position is part of every checkpoint, so
// a resumed run sees exactly the batches an uninterrupted run would.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/source.h"

namespace poseidon {

struct LoaderConfig {
  int64_t batch_size = 64;
  bool shuffle = true;
  uint64_t seed = 1;
  int rank = 0;        // this rank's shard of every epoch
  int world_size = 1;
  int prefetch = 2;    // batches prepared ahead
  bool drop_last = false;  // skip a last partial batch (training keeps shapes fixed)
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;  // batches already taken in this epoch
};

class Loader {
 public:
  Loader(std::shared_ptr<Source> source, LoaderConfig config);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Fills `data` [B, sample...] and `labels` [B] with the next batch (resized).
  void next(Tensor& data, Tensor& labels);
  LoaderPosition position() const { return position_; }
  void seek(LoaderPosition position);  // restarts prefetching from there
  int64_t batches_per_epoch() const;   // a last partial batch counts
  const Source& source() const { return *source_; }
  const LoaderConfig& config() const { return config_; }

 private:
  struct Batch {
    LoaderPosition at;
    std::vector<float> data;
    std::vector<float> labels;
    int64_t count = 0;
  };
  std::vector<int64_t> epoch_order(int64_t epoch) const;  // this rank's indices
  Batch produce(LoaderPosition at) const;
  void start();
  void stop();
  void run(LoaderPosition from);

  std::shared_ptr<Source> source_;
  LoaderConfig config_;
  LoaderPosition position_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stopping_ = false;
  std::exception_ptr error_;
};

}  // namespace poseidon
