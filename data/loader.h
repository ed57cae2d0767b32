// Loader: batches from a Source with seeded per-epoch shuffling, optional
// per-rank sharding, and a pool of worker threads that prepare the next
// batches while the current one trains. Workers take single examples, so one
// batch is decoded by all of them at once; every example lands at its own
// place with its own seed, so batches are the same for any number of workers.
// The position is part of every checkpoint, so a resumed run sees exactly the
// batches an uninterrupted run would.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
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
  int rank = 0;  // this rank's shard of every epoch
  int world_size = 1;
  int workers = 2;         // threads reading (decoding, augmenting) examples
  int prefetch = 2;        // batches prepared ahead, at most
  bool drop_last = false;  // skip a last partial batch (training keeps shapes fixed)
  // Workers fetch image sources' encoded examples (Source::read_encoded),
  // to be decoded elsewhere, for next_encoded(); an example without them
  // is decoded as ever.
  bool encoded = false;
};

// A batch of LoaderConfig::encoded examples, in batch order.
struct EncodedBatch {
  std::vector<int64_t> indices;  // the source's examples
  std::vector<uint64_t> seeds;   // each example's, as read() gets it
  std::vector<std::vector<uint8_t>> bytes;  // empty: decoded already, into `decoded`
  std::vector<std::string> names;
  std::vector<float> labels;
  std::unique_ptr<float[]> decoded;  // count() examples' room; set for those without bytes
  int64_t count() const { return static_cast<int64_t>(indices.size()); }
};

// Reads the loader's own keys of a data config map (`workers`, `prefetch`).
void read_loader_keys(const ConfigNode& data, LoaderConfig& config);

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
  // The next batch as encoded examples (LoaderConfig::encoded); advances as next().
  void next_encoded(EncodedBatch& batch);
  LoaderPosition position() const { return position_; }
  void seek(LoaderPosition position);  // restarts prefetching from there
  int64_t batches_per_epoch() const;   // a last partial batch counts
  // Examples the source could not read and replaced, in the batches next()
  // has returned since this loader was made.
  int64_t skipped() const { return skipped_; }
  // Seconds next() has spent waiting for its batch to be ready, in total:
  // the time the caller stood idle for want of data.
  double waited_s() const { return waited_s_; }
  const Source& source() const { return *source_; }
  const LoaderConfig& config() const { return config_; }

 private:
  struct Batch {
    LoaderPosition at;
    std::vector<int64_t> indices;  // the source's examples, in batch order
    std::unique_ptr<float[]> data;
    std::vector<float> labels;
    std::vector<std::vector<uint8_t>> encoded;  // LoaderConfig::encoded: empty where decoded into `data`
    std::vector<std::string> names;
    int64_t claimed = 0, done = 0, skipped = 0;
    std::exception_ptr error;  // of the lowest failing example, so it is the same on every run
    int64_t error_at = -1;
    int64_t count() const { return static_cast<int64_t>(indices.size()); }
  };
  std::vector<int64_t> epoch_order(int64_t epoch) const;  // this rank's indices
  uint64_t example_seed(int64_t epoch, int64_t index) const;
  std::unique_ptr<Batch> take();  // waits for the front batch; advances the position
  Batch* claimable();  // a batch with an example left to read; opens one when there is room
  void work();
  void start();
  void stop();

  std::shared_ptr<Source> source_;
  LoaderConfig config_;
  LoaderPosition position_;  // of the batch next() returns
  int64_t skipped_ = 0;
  double waited_s_ = 0;

  std::mutex mutex_;  // guards everything below and the counters of every Batch
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  std::deque<std::unique_ptr<Batch>> pending_;  // in order; the front is next()'s
  LoaderPosition next_open_;                    // of the batch opened after pending_.back()
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;  // epoch_order(order_epoch_)
  bool stopping_ = false;
};

}  // namespace poseidon
