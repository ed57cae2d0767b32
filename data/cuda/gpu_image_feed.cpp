// The GPU image feed: nvJPEG's batch, then the CPU path for what it left.
#include "data/gpu_image_feed.h"

#include <cstring>

#include "core/device_memory.h"
#include "core/error.h"

namespace poseidon {

GpuImageFeed::GpuImageFeed(const NvjpegLibrary& library, Loader& loader) : loader_(loader), decoder_(library) {
  POSEIDON_CHECK(loader.config().encoded) << "the GPU image feed needs a loader of encoded examples";
  POSEIDON_CHECK(loader.source().image_transform()) << "the GPU image feed needs an image source";
}

void GpuImageFeed::next(Tensor& data, Tensor& labels) {
  EncodedBatch b;
  loader_.next_encoded(b);
  const Source& source = loader_.source();
  const int64_t n = b.count(), sample = shape_numel(source.sample_shape());
  POSEIDON_CHECK(data.is_cuda() && data.numel() == n * sample)
      << "the GPU image feed fills a device tensor of " << n << " examples";
  std::vector<EncodedImage> images(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    images[i] = {b.bytes[i].data(), b.bytes[i].size(), b.seeds[i], b.names[i]};
  const std::vector<std::string> problems = decoder_.decode(images, *source.image_transform(), data.data());
  for (int64_t i = 0; i < n; ++i) {
    if (problems[i].empty()) continue;
    float* host = b.decoded.get() + i * sample;
    if (!b.bytes[i].empty()) {  // nvJPEG could not; the CPU path stops or skips as it would
      int64_t skipped = 0;
      b.labels[i] = static_cast<float>(source.read_skipping(b.indices[i], host, b.seeds[i], skipped));
      ++decoded_on_cpu_;
      skipped_ += skipped;
    }
    device_memory::copy(data.data() + i * sample, data.device(), host, Device{}, static_cast<size_t>(sample));
  }
  host_labels_.resize({n});
  std::memcpy(host_labels_.data(), b.labels.data(), static_cast<size_t>(n) * sizeof(float));
  labels.copy_from(host_labels_);
}

}  // namespace poseidon
