// Training batches of an image source decoded by nvJPEG and transformed on
// the GPU, then copied into the net's input on the compute stream, behind
// the step still reading the last batch: the loader's workers only read the
// encoded examples. An example nvJPEG cannot decode
// (a PNG, a CMYK JPEG, a damaged file) goes through the CPU path instead,
// with its errors and on_error as ever, and is copied into its place. Only
// built with the CUDA backend.
#pragma once

#include "data/loader.h"
#include "data/nvjpeg_batch.h"

namespace poseidon {

class GpuImageFeed {
 public:
  // `loader` reads with LoaderConfig::encoded, from a source with an
  // image_transform(); throws Error when nvJPEG cannot start.
  GpuImageFeed(const NvjpegLibrary& library, Loader& loader);

  // Fills `data` (device memory, the batch's shape already) and `labels`
  // (either device) with the loader's next batch.
  void next(Tensor& data, Tensor& labels);
  // Examples the CPU path decoded because nvJPEG could not, so far, and
  // those it passed over (on_error: skip) in their place.
  int64_t decoded_on_cpu() const { return decoded_on_cpu_; }
  int64_t skipped() const { return skipped_; }

 private:
  Loader& loader_;
  NvjpegBatchDecoder decoder_;
  Tensor host_labels_;
  int64_t decoded_on_cpu_ = 0, skipped_ = 0;
};

}  // namespace poseidon
