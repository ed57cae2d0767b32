// Sources of labelled examples. A source is random-access and thread-safe:
// read(i) decodes example i, so loaders can shuffle, shard and prefetch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/tensor.h"

namespace poseidon {

class ImageTransform;

class Source {
 public:
  virtual ~Source() = default;
  virtual int64_t size() const = 0;        // examples per epoch
  virtual Shape sample_shape() const = 0;  // e.g. [1, 28, 28]
  virtual int64_t num_classes() const = 0;
  // Writes example `index` (shape_numel(sample_shape()) floats) to `dst` and
  // returns its label. `seed` drives any random augmentation of this example.
  virtual int64_t read(int64_t index, float* dst, uint64_t seed) const = 0;
  // As read(), for sources that may replace an example they cannot decode by
  // another (deterministically, so a run stays reproducible): adds to
  // `skipped` the examples passed over. The loader reads through this.
  virtual int64_t read_skipping(int64_t index, float* dst, uint64_t seed, int64_t& skipped) const {
    return read(index, dst, seed);
  }
  // Where the first label outside [0, classes), other than `ignored`, is
  // ("labels.idx: label 12 of example 7"), for sources that know their
  // labels without decoding examples; "" when every label is in range or the
  // source cannot tell cheaply. Lets training reject such data at the start.
  virtual std::string find_label_outside(int64_t classes, int64_t ignored) const { return ""; }
  // Image sources, for decoding elsewhere (nvJPEG on the GPU): the transform
  // their images go through (null for other sources), and example `index`'s
  // encoded bytes, its label and a name for errors; false where the example
  // cannot be used as it is (read_skipping then stops or skips, as ever).
  virtual const ImageTransform* image_transform() const { return nullptr; }
  virtual bool read_encoded(int64_t index, std::vector<uint8_t>& bytes, int64_t& label, std::string& name) const {
    return false;
  }
  // For sources stored in parts that each rank reads apart (tar shards):
  // rank `rank` of `world`'s examples of `epoch`, size() / world of them,
  // in reading order. Empty: the loader shuffles all indices under the seed
  // and gives rank r every world-th one.
  virtual std::vector<int64_t> rank_order(int64_t epoch, uint64_t seed, int rank, int world, bool shuffle) const {
    return {};
  }
};

// Builds a source from a `data.train` / `data.test` config map. Relative
// paths are resolved against `base_dir` (the config file's folder).
std::shared_ptr<Source> make_source(const ConfigNode& config, const std::string& base_dir);

}  // namespace poseidon
