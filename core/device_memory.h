// The memory seam between the engine and its devices: allocation, fill,
// copies and the float32 <-> bfloat16 casts of buffers on any Device. Host memory is handled here; CUDA
// memory by core/cuda (caching allocator, compute stream) when the build has
// the CUDA backend, and with a clear error otherwise. Device work is queued
// on the device's compute stream, so it is ordered with the layers' kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/gate_scan.h"
#include "core/update_groups.h"
#include "core/update_rules.h"

namespace poseidon::device_memory {

// Whether this binary has the CUDA backend compiled in.
bool cuda_built();
// The number of usable GPUs: 0 without the backend, a driver or a device
// (never throws). cuda_unavailable_reason() says why it is 0.
int cuda_device_count();
std::string cuda_unavailable_reason();
// Why a build has no CUDA backend, from how it was configured (POSEIDON_CUDA:
// OFF left it out on purpose; AUTO found no nvcc).
std::string missing_backend_reason(const std::string& configured);
// Throws a clear Error unless `device` can be used in this process.
void require(const Device& device);

// Zeroed, 64-byte aligned host memory (freed with std::free).
void* host_allocate(size_t bytes);
// Zeroed memory of `bytes` on `device`; 64-byte aligned on the host.
void* allocate(const Device& device, size_t bytes);
void release(const Device& device, void* ptr, size_t bytes);
void fill(const Device& device, float* ptr, size_t count, float value);
// Copies `count` floats between any two devices, ordered on the GPU's
// compute stream. Returns when the host may read `dst` (a copy to the host
// waits for the stream) and, for a pageable `src`, change it (the driver
// takes a pageable source in before the call returns; a pinned one, such as
// host memory the staging streams register, is read when the stream reaches
// the copy).
void copy(float* dst, const Device& dst_device, const float* src, const Device& src_device, size_t count);
// The same for `bytes` bytes of any type.
void copy_bytes(void* dst, const Device& dst_device, const void* src, const Device& src_device, size_t bytes);
// dst[i] = src[i] rounded to bfloat16 (core/bf16.h), and dst[i] = src[i]
// widened to float32, for `count` elements on one device, ordered on a GPU's
// compute stream.
void round_to_bf16(const Device& device, uint16_t* dst, const float* src, size_t count);
void widen_bf16(const Device& device, float* dst, const uint16_t* src, size_t count);
// dst[i] = (dst[i] + src[i]) rounded to bfloat16, the sum in float32 (a
// float32 gradient joining a bfloat16 one: core/blob_types.h).
void add_rounded_into_bf16(const Device& device, uint16_t* dst, const float* src, size_t count);
// Waits until the device's queued work is done (no-op on the host).
void synchronize(const Device& device);
// TF32 tensor-core math for the GPU's float32 GEMMs from now on, and for the
// convolutions set up from now on (precision tf32; POSEIDON_TF32=1 sets it
// at start). The CPU has no TF32: a host device is an error.
void set_tf32(const Device& device, bool on);
// Whether the GPU's convolutions set up from now on take only deterministic
// cuDNN algorithms for their backward passes (the same gradients from the
// same inputs, run after run), or the fastest ones, which sum with atomics.
// The default is deterministic unless POSEIDON_CUDNN_FASTEST=1. The CPU's
// kernels are deterministic either way: there it changes nothing.
void set_deterministic(const Device& device, bool on);

// The engine's own computations on GPU buffers (layers bring theirs): the
// bfloat16 fill and casts of Tensor, the solver's step (core/solver.h) and
// the finite check (core/finite_check.h).
void gpu_fill_bf16(const Device& device, uint16_t* ptr, size_t count, uint16_t value);
void gpu_round_to_bf16(const Device& device, uint16_t* dst, const float* src, size_t count);
void gpu_widen_bf16(const Device& device, float* dst, const uint16_t* src, size_t count);
void gpu_add_rounded_into_bf16(const Device& device, uint16_t* dst, const float* src, size_t count);
void gpu_solver_update(const Device& device, const UpdateStep& step, float* value, const float* grad, float* state,
                       size_t count);

// Numbers the host works out for each step and kernels read from GPU memory
// (the update's table, dropout's draw): send() copies them into pinned
// memory and one copy on the compute stream takes them to a GPU buffer
// whose address never changes, so the launches that read it keep their
// arguments from step to step (what a CUDA graph replays). The pinned side
// is a ring of slots used in turn (a step may send several times: an update
// per all-reduced bucket): a slot is written again only once the copy sent
// from it has run. Where that copy is still queued (behind the rest of
// backward, for a bucket's update sent while backward runs) a new slot joins
// the ring rather than the host waiting, up to 64 slots; past them the host
// waits (like the Uploader's, a wait for an earlier pinned copy is not
// counted as a host wait). While a step is captured (core/step_recording.h) the copy
// is kept out of the graph and recorded instead: sent before the launch of
// the captured step, and before each later launch `refill` first writes
// that step's numbers into the slot (drawing, counting: the host work a
// replay would otherwise skip).
class StepUpload {
 public:
  using Refill = std::function<void(void* slot)>;
  StepUpload(const Device& device, size_t bytes);
  ~StepUpload();
  StepUpload(const StepUpload&) = delete;
  StepUpload& operator=(const StepUpload&) = delete;
  const Device& device() const { return device_; }
  size_t bytes() const { return bytes_; }
  // Queues the copy of `bytes` (at most bytes()) bytes of `data` to
  // target(), behind the compute stream's work so far; `refill` writes as
  // many.
  void send(const void* data, size_t bytes, Refill refill);
  // The GPU buffer the kernels read.
  const void* target() const;
  // The pinned slots the ring holds now (4 at first).
  size_t slot_count() const;

 private:
  struct Slots;
  // The next pinned slot, once the copy sent from it before has run.
  void* next_slot();
  // Queues the copy of `bytes` of the slot next_slot() gave.
  void send_slot(size_t bytes);
  Device device_;
  size_t bytes_;
  std::unique_ptr<Slots> slots_;
};

// The update of every parameter of a table of `count` slices (core/
// update_groups.h), sent to the GPU through `upload` (at least count
// slices large), in one launch; nothing changes where `rejected` (GPU
// memory, may be null) holds a non-zero value when the launch runs (the
// finite guard: core/step_gate.h). `refill` writes a later step's table
// into a slot where the step is captured (StepUpload).
void gpu_update_table(StepUpload& upload, const UpdateSlice* table, int count, const float* rejected = nullptr,
                      StepUpload::Refill refill = {});
// The finite guard's pass over a step (core/gate_scan.h), one launch.
void gpu_gate_scan(const Device& device, const GateScan& scan, float* gate);

// Pinned host memory for `slots` copies of `count` floats of GPU memory,
// each queued behind the compute stream's work so far (fetch) and read
// once it has landed (read waits for that copy alone): what the host reads
// of a step it does not wait for.
class Readback {
 public:
  Readback(const Device& device, int slots, size_t count);
  ~Readback();
  Readback(const Readback&) = delete;
  Readback& operator=(const Readback&) = delete;
  void fetch(int slot, const float* device_source);
  const float* read(int slot);

 private:
  struct Slots;
  std::unique_ptr<Slots> slots_;
};
// Index of the first NaN or infinity, or -1; waits for the compute stream.
int64_t gpu_first_non_finite(const Device& device, const float* ptr, size_t count);

}  // namespace poseidon::device_memory
