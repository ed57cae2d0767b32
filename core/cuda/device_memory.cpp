// The memory seam (core/device_memory.h) in a build with the CUDA backend:
// host memory as always, GPU memory through each device's caching
// allocator, with fills and copies ordered on its compute stream; and the
// feeding of core/device_pipeline.h (pinned uploads, the counts tests read).
#include "core/device_memory.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/cuda/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/kernels.h"
#include "core/device_pipeline.h"
#include "core/error.h"
#include "core/step_recording.h"

namespace poseidon::device_memory {

namespace {
// Queried once: the answer does not change while the process runs.
struct Availability {
  int count = 0;
  std::string reason;
};

const Availability& availability() {
  static const Availability a = [] {
    Availability r;
    int n = 0;
    cudaError_t status = cudaGetDeviceCount(&n);
    if (status != cudaSuccess) {
      cudaGetLastError();
      r.reason = std::string("no usable GPU: ") + cudaGetErrorString(status);
    } else if (n == 0) {
      r.reason = "no GPU is visible (CUDA_VISIBLE_DEVICES?)";
    }
    r.count = status == cudaSuccess ? n : 0;
    return r;
  }();
  return a;
}
}  // namespace

bool cuda_built() { return true; }
int cuda_device_count() { return availability().count; }
std::string cuda_unavailable_reason() { return availability().reason; }

void require(const Device& device) {
  if (!device.is_cuda()) return;
  if (cuda_device_count() == 0) throw Error("device " + device.str() + ": " + cuda_unavailable_reason());
  if (device.index >= cuda_device_count())
    throw Error("device " + device.str() + " does not exist: " + std::to_string(cuda_device_count()) +
                " GPU(s) visible");
}

namespace {
// device_counts' figures, per GPU.
struct Counters {
  std::atomic<int64_t> host_waits{0}, allocations{0};
};
Counters& counters(int device) {
  static std::array<Counters, 64> per_device;
  return per_device.at(static_cast<size_t>(device));
}
void count_host_wait(int device) { counters(device).host_waits.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

void* allocate(const Device& device, size_t bytes) {
  if (!device.is_cuda()) return host_allocate(bytes);
  require(device);
  auto& ctx = cuda::Context::get(device.index);
  // While the step is captured the zeroing below would only be recorded:
  // the step's plain run makes the tensor.
  ctx.refuse_memory_while_captured();
  counters(device.index).allocations.fetch_add(1, std::memory_order_relaxed);
  void* ptr = ctx.allocator().allocate(bytes);
  // Reused blocks hold old contents; new tensors start at zero like on the host.
  POSEIDON_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, ctx.compute()));
  return ptr;
}

void release(const Device& device, void* ptr, size_t bytes) {
  if (!device.is_cuda()) {
    std::free(ptr);
    return;
  }
  cuda::Context::get(device.index).allocator().release(ptr);
}

void fill(const Device& device, float* ptr, size_t count, float value) {
  if (!device.is_cuda()) {
    std::fill(ptr, ptr + count, value);
    return;
  }
  cuda::fill(ptr, count, value, cuda::Context::get(device.index).compute());
}

void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, size_t bytes) {
  if (!bytes) return;
  if (!dst_device.is_cuda() && !src_device.is_cuda()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Unified addressing lets the runtime tell the direction; the work is
  // ordered on the compute stream of the GPU involved (the source's for
  // device-to-device copies).
  const Device& gpu = src_device.is_cuda() ? src_device : dst_device;
  cudaStream_t stream = cuda::Context::get(gpu.index).compute();
  // Pageable host memory may hold the host until the stream reaches the copy.
  if (!dst_device.is_cuda() || !src_device.is_cuda()) count_host_wait(gpu.index);
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  // A copy to the host must be complete before the host reads it. A copy
  // from pageable host memory has taken its source into the driver's own
  // bounce buffer when the call returns, so the host need not wait for it
  // (from pinned memory it has not: see the header).
  if (!dst_device.is_cuda()) POSEIDON_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void synchronize(const Device& device) {
  if (!device.is_cuda()) return;
  count_host_wait(device.index);
  POSEIDON_CUDA_CHECK(cudaStreamSynchronize(cuda::Context::get(device.index).compute()));
}

DeviceCounts device_counts(const Device& device) {
  require(device);
  const Counters& c = counters(device.index);
  return {c.host_waits.load(), c.allocations.load(),
          static_cast<int64_t>(cuda::Context::get(device.index).allocator().stats().driver_allocations)};
}

struct Uploader::Buffers {
  int device = 0;
  size_t capacity = 0;           // floats per buffer
  float* pinned[2] = {};         // host side, page-locked
  float* staged[2] = {};         // device side, the copy stream's target
  cudaEvent_t landed[2] = {};    // the copy stream has filled staged[i]
  cudaEvent_t consumed[2] = {};  // the compute stream has copied staged[i] out
  bool used[2] = {false, false};
  int next = 0;
  void release() {
    // Called with no copy in flight (see upload); errors were reported by earlier calls.
    for (int i = 0; i < 2; ++i) {
      if (pinned[i]) cudaFreeHost(pinned[i]);
      if (staged[i]) cuda::Context::get(device).allocator().release(staged[i]);
      pinned[i] = staged[i] = nullptr;
    }
  }
  ~Buffers() {
    for (int i = 0; i < 2; ++i) {
      if (used[i]) cudaEventSynchronize(consumed[i]);
      if (landed[i]) cudaEventDestroy(landed[i]);
      if (consumed[i]) cudaEventDestroy(consumed[i]);
    }
    release();
  }
};

Uploader::Uploader(const Device& device) : buffers_(std::make_unique<Buffers>()) {
  require(device);
  cuda::Context::get(device.index);
  buffers_->device = device.index;
  for (int i = 0; i < 2; ++i) {
    POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&buffers_->landed[i], cudaEventDisableTiming));
    POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&buffers_->consumed[i], cudaEventDisableTiming));
  }
}

Uploader::~Uploader() = default;

void Uploader::upload(float* dst, const float* src, size_t count) {
  if (!count) return;
  Buffers& b = *buffers_;
  cuda::Context& ctx = cuda::Context::get(b.device);
  if (count > b.capacity) {
    // A larger batch than before (the first one): no copy may be in flight.
    for (int i = 0; i < 2; ++i)
      if (b.used[i]) POSEIDON_CUDA_CHECK(cudaEventSynchronize(b.consumed[i]));
    b.release();
    for (int i = 0; i < 2; ++i) {
      POSEIDON_CUDA_CHECK(cudaMallocHost(&b.pinned[i], count * sizeof(float)));
      b.staged[i] = static_cast<float*>(ctx.allocate_for(count * sizeof(float), ctx.to_device()));
    }
    b.capacity = count;
  }
  const int i = b.next;
  b.next = 1 - i;
  const size_t bytes = count * sizeof(float);
  // The copy out of this pinned buffer two uploads ago has long landed.
  if (b.used[i]) POSEIDON_CUDA_CHECK(cudaEventSynchronize(b.landed[i]));
  std::memcpy(b.pinned[i], src, bytes);
  if (b.used[i]) POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(ctx.to_device(), b.consumed[i], 0));
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(b.staged[i], b.pinned[i], bytes, cudaMemcpyHostToDevice, ctx.to_device()));
  POSEIDON_CUDA_CHECK(cudaEventRecord(b.landed[i], ctx.to_device()));
  POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(ctx.compute(), b.landed[i], 0));
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(dst, b.staged[i], bytes, cudaMemcpyDeviceToDevice, ctx.compute()));
  POSEIDON_CUDA_CHECK(cudaEventRecord(b.consumed[i], ctx.compute()));
  b.used[i] = true;
}

void set_tf32(const Device& device, bool on) {
  POSEIDON_REQUIRE(device.is_cuda()) << "TF32 is GPU math; device " << device.str() << " has none";
  cuda::Context::get(device.index).set_tf32(on);
}

}  // namespace poseidon::device_memory

namespace poseidon::device_memory {

void gpu_fill_bf16(const Device& device, uint16_t* ptr, size_t count, uint16_t value) {
  cuda::fill_bf16(ptr, count, value, cuda::Context::get(device.index).compute());
}

void gpu_round_to_bf16(const Device& device, uint16_t* dst, const float* src, size_t count) {
  cuda::round_to_bf16(dst, src, count, cuda::Context::get(device.index).compute());
}

void gpu_widen_bf16(const Device& device, float* dst, const uint16_t* src, size_t count) {
  cuda::widen_bf16(dst, src, count, false, cuda::Context::get(device.index).compute());
}

void gpu_add_rounded_into_bf16(const Device& device, uint16_t* dst, const float* src, size_t count) {
  cuda::add_rounded_into_bf16(dst, src, count, cuda::Context::get(device.index).compute());
}

void gpu_solver_update(const Device& device, const UpdateStep& step, float* value, const float* grad, float* state,
                       size_t count) {
  cuda::solver_update(step, value, grad, state, count, cuda::Context::get(device.index).compute());
}

struct StepUpload::Slots {
  // A ring of pinned slots, in the order they are used; it grows where the
  // oldest slot's copy has not run yet when a send needs it, up to kMost.
  static constexpr size_t kFirst = 4, kMost = 64;
  struct Slot {
    void* host = nullptr;         // pinned
    cudaEvent_t sent = nullptr;   // the copy from host has run
    bool pending = false;
  };
  std::vector<Slot> ring;
  size_t next = 0;
  void* target = nullptr;  // GPU memory

  // Inserts a new slot of `bytes` at ring[at].
  void add(size_t at, size_t bytes) {
    Slot slot;
    POSEIDON_CUDA_CHECK(cudaMallocHost(&slot.host, std::max<size_t>(1, bytes)));
    const cudaError_t made = cudaEventCreateWithFlags(&slot.sent, cudaEventDisableTiming);
    if (made != cudaSuccess) cudaFreeHost(slot.host);
    POSEIDON_CUDA_CHECK(made);
    ring.insert(ring.begin() + std::ptrdiff_t(at), slot);
  }
  ~Slots() {
    // Destructors do not throw; a failure here was reported by earlier
    // calls. A copy still queued from a slot must run before it is freed.
    for (Slot& slot : ring) {
      if (slot.pending) cudaEventSynchronize(slot.sent);
      cudaEventDestroy(slot.sent);
      cudaFreeHost(slot.host);
    }
  }
};

StepUpload::StepUpload(const Device& device, size_t bytes)
    : device_(device), bytes_(bytes), slots_(std::make_unique<Slots>()) {
  require(device);
  cuda::Context::get(device.index);  // makes it the thread's device
  for (size_t i = 0; i < Slots::kFirst; ++i) slots_->add(i, bytes);
  slots_->target = allocate(device, std::max<size_t>(1, bytes));
}

StepUpload::~StepUpload() {
  if (slots_ && slots_->target) release(device_, slots_->target, std::max<size_t>(1, bytes_));
}

size_t StepUpload::slot_count() const { return slots_->ring.size(); }

void* StepUpload::next_slot() {
  Slots& s = *slots_;
  // Sends queued behind a long stretch of the compute stream's work (the
  // updates of buckets that finish during backward) would wait for it here:
  // a new slot takes the send instead, and the ring keeps its order.
  if (s.ring[s.next].pending && s.ring.size() < Slots::kMost) {
    const cudaError_t state = cudaEventQuery(s.ring[s.next].sent);
    if (state == cudaErrorNotReady) {
      cudaGetLastError();  // not an error, but kept as the last one: cleared
      s.add(s.next, bytes_);
    } else {
      POSEIDON_CUDA_CHECK(state);
    }
  }
  Slots::Slot& slot = s.ring[s.next];
  if (slot.pending) POSEIDON_CUDA_CHECK(cudaEventSynchronize(slot.sent));
  slot.pending = false;
  return slot.host;
}

void StepUpload::send_slot(size_t bytes) {
  Slots& s = *slots_;
  Slots::Slot& slot = s.ring[s.next];
  cudaStream_t stream = cuda::Context::get(device_.index).compute();
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(s.target, slot.host, bytes, cudaMemcpyHostToDevice, stream));
  POSEIDON_CUDA_CHECK(cudaEventRecord(slot.sent, stream));
  slot.pending = true;
  s.next = (s.next + 1) % s.ring.size();
}

void StepUpload::send(const void* data, size_t bytes, Refill refill) {
  POSEIDON_CHECK(bytes <= bytes_) << "a send of " << bytes << " bytes through an upload of " << bytes_;
  StepRecording* recording = StepRecording::active();
  if (!recording) {
    std::memcpy(next_slot(), data, bytes);
    send_slot(bytes);
    return;
  }
  POSEIDON_CHECK(refill) << "a number sent to the GPU each step has no way to be worked out again for a replay";
  // Kept until the first launch: no pinned slot is waited for inside a capture.
  auto captured = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(data),
                                                               static_cast<const unsigned char*>(data) + bytes);
  recording->before_launch([this, captured, refill = std::move(refill)](bool again) {
    void* slot = next_slot();
    if (again)
      refill(slot);
    else
      std::memcpy(slot, captured->data(), captured->size());
    send_slot(captured->size());
  });
}

const void* StepUpload::target() const { return slots_->target; }

void gpu_update_table(StepUpload& upload, const UpdateSlice* table, int count, const float* rejected,
                      StepUpload::Refill refill) {
  if (!count) return;
  POSEIDON_CHECK(size_t(count) * sizeof(UpdateSlice) <= upload.bytes())
      << "an update table of " << count << " parameters does not fit an upload of " << upload.bytes() << " bytes";
  upload.send(table, size_t(count) * sizeof(UpdateSlice), std::move(refill));
  cuda::update_table(static_cast<const UpdateSlice*>(upload.target()), count, update_total(table, count), rejected,
                     cuda::Context::get(upload.device().index).compute());
}

void gpu_gate_scan(const Device& device, const GateScan& scan, float* gate) {
  cuda::gate_scan(scan, gate, cuda::Context::get(device.index).compute());
}

struct Readback::Slots {
  int device = 0;
  size_t count = 0;
  float* host = nullptr;            // slots x count, pinned
  std::vector<cudaEvent_t> landed;  // per slot: its last copy has reached the host
  std::vector<bool> fetched;        // per slot: a copy was queued into it
  ~Slots() {
    // Destructors do not throw; a failure here was reported by earlier calls.
    for (cudaEvent_t e : landed)
      if (e) cudaEventDestroy(e);
    if (host) cudaFreeHost(host);
  }
};

Readback::Readback(const Device& device, int slots, size_t count) : slots_(std::make_unique<Slots>()) {
  require(device);
  cuda::Context::get(device.index);  // makes it the thread's device
  slots_->device = device.index;
  slots_->count = count;
  POSEIDON_CUDA_CHECK(cudaMallocHost(&slots_->host, std::max<size_t>(1, slots * count) * sizeof(float)));
  slots_->landed.assign(slots, nullptr);
  slots_->fetched.assign(slots, false);
  for (cudaEvent_t& e : slots_->landed) POSEIDON_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

Readback::~Readback() = default;

void Readback::fetch(int slot, const float* device_source) {
  cudaStream_t stream = cuda::Context::get(slots_->device).compute();
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(slots_->host + slot * slots_->count, device_source, slots_->count * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream));
  POSEIDON_CUDA_CHECK(cudaEventRecord(slots_->landed[slot], stream));
  slots_->fetched[slot] = true;
}

const float* Readback::read(int slot) {
  POSEIDON_CHECK(slots_->fetched[slot]) << "slot " << slot << " of a readback is read before anything was fetched into it";
  POSEIDON_CUDA_CHECK(cudaEventSynchronize(slots_->landed[slot]));
  return slots_->host + slot * slots_->count;
}

void set_deterministic(const Device& device, bool on) {
  if (device.is_cuda()) cuda::Context::get(device.index).set_deterministic(on);
}

int64_t gpu_first_non_finite(const Device& device, const float* ptr, size_t count) {
  count_host_wait(device.index);
  return cuda::first_non_finite(ptr, count, cuda::Context::get(device.index).compute());
}

}  // namespace poseidon::device_memory
