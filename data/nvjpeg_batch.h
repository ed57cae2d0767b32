// JPEGs decoded by nvJPEG on the GPU and transformed there: each image is
// decoded whole to 8-bit RGB in device memory, then one kernel applies the
// example's ResamplePlan (ImageTransform::plan at full size, the same seed
// as the CPU path: the same window and mirror), bilinear as the CPU's exact
// arithmetic (OpenCV's INTER_LINEAR, edges clamped to the resized image or
// to the random resized crop's window), then scaling to [0, 1] and the
// mean/std normalisation, into CHW float planes in device memory. Only built
// with the CUDA backend; the library comes from load_nvjpeg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/nvjpeg_library.h"
#include "data/transforms.h"

namespace poseidon {

struct EncodedImage {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t seed = 0;  // the example's seed, as the CPU path's
  std::string name;   // for errors: file or shard and member
};

class NvjpegBatchDecoder {
 public:
  // Throws Error when the library is not loaded or nvJPEG cannot start on
  // the current CUDA device.
  explicit NvjpegBatchDecoder(const NvjpegLibrary& library);
  ~NvjpegBatchDecoder();
  NvjpegBatchDecoder(const NvjpegBatchDecoder&) = delete;
  NvjpegBatchDecoder& operator=(const NvjpegBatchDecoder&) = delete;

  // Writes images.size() examples of t.output_shape() floats, one after
  // the other, at `device_dst` (device memory) in stream order: they are
  // decoded into a batch of the decoder's own, which one copy on the
  // device's compute stream (core/cuda/context.h) then takes to
  // `device_dst`, so that work queued there before the call (a training
  // step reading the last batch) still reads the old values and work queued
  // after reads the new. Returns, once the decoding is done, one string per
  // image: "" or why it could not be decoded (an image of no bytes
  // included; its place then holds no particular values, for the caller to
  // fill on the compute stream).
  std::vector<std::string> decode(const std::vector<EncodedImage>& images, const ImageTransform& t, float* device_dst);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace poseidon
