// nvJPEG decodes of whole images into one reused device buffer, each followed
// on the same stream by the kernel that resamples, mirrors and normalises
// the example's window into its place in a batch of the decoder's own; the
// batch then goes to the caller's buffer by one copy on the compute stream.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"
#include "data/nvjpeg_batch.h"

namespace poseidon {

namespace {

// Where output pixels read the source: coordinate = offset + (i + 0.5) * step - 0.5,
// clamped to [first, last] (OpenCV's INTER_LINEAR at the edges).
struct Axis {
  double offset, step;
  int first, last;
};

__device__ inline void sample_position(const Axis& a, int i, int& low, int& high, float& weight) {
  double at = a.offset + (i + 0.5) * a.step - 0.5;
  if (at <= a.first) {
    low = high = a.first;
    weight = 0.f;
    return;
  }
  if (at >= a.last) {
    low = high = a.last;
    weight = 0.f;
    return;
  }
  low = static_cast<int>(floor(at));
  high = min(low + 1, a.last);
  weight = static_cast<float>(at - low);
}

struct Normalise {
  float mean[3], std[3];
};

// One thread per output pixel; the three planes of the example at `dst`.
__global__ void resample_rgb(const unsigned char* rgb, size_t pitch, Axis rows, Axis cols, int out_h, int out_w,
                             bool mirror, Normalise n, float* dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= out_w || y >= out_h) return;
  int y0, y1, x0, x1;
  float wy, wx;
  sample_position(rows, y, y0, y1, wy);
  sample_position(cols, mirror ? out_w - 1 - x : x, x0, x1, wx);
  const size_t plane = static_cast<size_t>(out_h) * out_w;
  for (int c = 0; c < 3; ++c) {
    const float a = rgb[y0 * pitch + 3 * x0 + c], b = rgb[y0 * pitch + 3 * x1 + c];
    const float d = rgb[y1 * pitch + 3 * x0 + c], e = rgb[y1 * pitch + 3 * x1 + c];
    const float top = a + (b - a) * wx, bottom = d + (e - d) * wx;
    const float v = top + (bottom - top) * wy;
    dst[c * plane + static_cast<size_t>(y) * out_w + x] = (v / 255.f - n.mean[c]) / n.std[c];
  }
}

}  // namespace

struct NvjpegBatchDecoder::State {
  NvjpegLibrary library;
  NvjpegHandle handle = nullptr;
  NvjpegState jpeg = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  unsigned char* buffer = nullptr;  // the decoded image, RGB interleaved
  size_t capacity = 0;
  // The transformed batch, written on `stream`, then copied out on the
  // compute stream; `copied` marks that copy's end, which the next batch's
  // writes wait for.
  float* batch = nullptr;
  size_t batch_capacity = 0;  // floats
  cudaEvent_t copied = nullptr;
  bool copy_queued = false;
};

NvjpegBatchDecoder::NvjpegBatchDecoder(const NvjpegLibrary& library) : state_(std::make_unique<State>()) {
  if (!library.loaded()) throw Error("nvJPEG is not loaded: " + library.problem);
  state_->library = library;
  int status = library.create_simple(&state_->handle);
  if (status != 0) throw Error("nvjpegCreateSimple failed with status " + std::to_string(status));
  status = library.state_create(state_->handle, &state_->jpeg);
  if (status != 0) throw Error("nvjpegJpegStateCreate failed with status " + std::to_string(status));
  POSEIDON_CUDA_CHECK(cudaGetDevice(&state_->device));
  POSEIDON_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&state_->copied, cudaEventDisableTiming));
}

NvjpegBatchDecoder::~NvjpegBatchDecoder() {
  if (state_->stream) cudaStreamSynchronize(state_->stream);
  if (state_->copy_queued) cudaEventSynchronize(state_->copied);
  if (state_->copied) cudaEventDestroy(state_->copied);
  if (state_->batch) cudaFree(state_->batch);
  if (state_->buffer) cudaFree(state_->buffer);
  if (state_->stream) cudaStreamDestroy(state_->stream);
  if (state_->jpeg) state_->library.state_destroy(state_->jpeg);
  if (state_->handle) state_->library.destroy(state_->handle);
}

std::vector<std::string> NvjpegBatchDecoder::decode(const std::vector<EncodedImage>& images, const ImageTransform& t,
                                                    float* device_dst) {
  State& s = *state_;
  const NvjpegLibrary& lib = s.library;
  const Shape shape = t.output_shape();
  const size_t numel = static_cast<size_t>(shape[0] * shape[1] * shape[2]);
  const ImageTransformConfig& config = t.config();
  Normalise n{};
  for (int c = 0; c < 3; ++c) {
    n.mean[c] = config.mean[c];
    n.std[c] = config.std[c];
  }
  cudaPointerAttributes where{};
  POSEIDON_CUDA_CHECK(cudaPointerGetAttributes(&where, device_dst));
  POSEIDON_CHECK(where.type == cudaMemoryTypeDevice && where.device == s.device)
      << "the nvJPEG decoder of GPU " << s.device << " writes a batch in that GPU's memory";
  std::vector<std::string> problems(images.size());
  const size_t total = images.size() * numel;
  if (total > s.batch_capacity) {
    if (s.copy_queued) POSEIDON_CUDA_CHECK(cudaEventSynchronize(s.copied));
    if (s.batch) POSEIDON_CUDA_CHECK(cudaFree(s.batch));
    s.batch = nullptr;
    POSEIDON_CUDA_CHECK(cudaMalloc(&s.batch, total * sizeof(float)));
    s.batch_capacity = total;
  }
  // The last batch's copy out, queued behind the work that read the caller's
  // buffer before it, runs before this batch's writes.
  if (s.copy_queued) POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(s.stream, s.copied, 0));
  for (size_t i = 0; i < images.size(); ++i) {
    const EncodedImage& image = images[i];
    if (image.size == 0) {
      problems[i] = "no encoded bytes";
      continue;
    }
    int components = 0, subsampling = 0, widths[4] = {}, heights[4] = {};
    int status = lib.get_image_info(s.handle, image.data, image.size, &components, &subsampling, widths, heights);
    if (status != 0) {
      problems[i] = "nvJPEG cannot read it as a JPEG (nvjpegGetImageInfo status " + std::to_string(status) + ")";
      continue;
    }
    const int height = heights[0], width = widths[0];
    const ResamplePlan p = t.plan(height, width, image.seed, image.name, false);
    const size_t pitch = static_cast<size_t>(width) * 3, bytes = pitch * static_cast<size_t>(height);
    if (bytes > s.capacity) {
      POSEIDON_CUDA_CHECK(cudaStreamSynchronize(s.stream));
      if (s.buffer) POSEIDON_CUDA_CHECK(cudaFree(s.buffer));
      s.buffer = nullptr;
      POSEIDON_CUDA_CHECK(cudaMalloc(&s.buffer, bytes));
      s.capacity = bytes;
    }
    NvjpegImage out{};
    out.channel[0] = s.buffer;
    out.pitch[0] = pitch;
    status = lib.decode(s.handle, s.jpeg, image.data, image.size, kNvjpegOutputRgbi, &out, s.stream);
    if (status != 0) {
      problems[i] = "nvJPEG cannot decode it (nvjpegDecode status " + std::to_string(status) + ")";
      continue;
    }
    // The resized image's edges, or the random resized crop's window's.
    const bool whole = config.rrc_h == 0;
    const int row_first = whole ? 0 : static_cast<int>(p.crop.top);
    const int col_first = whole ? 0 : static_cast<int>(p.crop.left);
    const int row_last = whole ? height - 1 : static_cast<int>(p.crop.top + p.crop.height - 1);
    const int col_last = whole ? width - 1 : static_cast<int>(p.crop.left + p.crop.width - 1);
    const Axis rows{p.top, p.height / static_cast<double>(p.out_h), row_first, row_last};
    const Axis cols{p.left, p.width / static_cast<double>(p.out_w), col_first, col_last};
    const dim3 block(32, 8);
    const dim3 grid(static_cast<unsigned>((p.out_w + 31) / 32), static_cast<unsigned>((p.out_h + 7) / 8));
    resample_rgb<<<grid, block, 0, s.stream>>>(s.buffer, pitch, rows, cols, static_cast<int>(p.out_h),
                                               static_cast<int>(p.out_w), p.mirror, n, s.batch + i * numel);
    POSEIDON_CUDA_CHECK(cudaGetLastError());
  }
  POSEIDON_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  // Behind whatever the compute stream has queued (a training step still
  // reading the last batch from `device_dst`), ahead of what it queues next.
  cudaStream_t compute = cuda::Context::get(s.device).compute();
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(device_dst, s.batch, total * sizeof(float), cudaMemcpyDeviceToDevice, compute));
  POSEIDON_CUDA_CHECK(cudaEventRecord(s.copied, compute));
  s.copy_queued = true;
  return problems;
}

}  // namespace poseidon
