// Sums over the ranks of a job on their GPUs with NCCL, for the all-reduce
// groups of a GPU net (dist/schemes/allreduce.h): a bucket's gradients are summed in
// place on the GPU, over NVLink or the network as NCCL finds them, and
// either the sum is copied into host memory, where the exchange averages and
// applies it (a net staged through a host mirror), or the mean stays on the
// GPU for the update there (a net exchanged on its device). NCCL computes
// each element's sum once and passes it on, so every rank receives the same
// bits and replicas stay identical. One communicator per process on a
// stream of its own, which waits for the compute stream's gradients by an
// event (mark_gradients_queued), never by a host wait; the caller shares
// the id (unique_id() on one rank) over MPI, and NCCL needs a GPU of its
// own per rank. In a build without the CUDA backend constructing one throws.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace poseidon::dist {

class GpuAllReduce {
 public:
  // The id every rank passes to the constructor, made by one of them.
  static std::vector<char> unique_id();
  // Which GPU `gpu` is, the same string in every process that sees it and
  // different for every other GPU of the job, on this host or another (its
  // UUID; PCI bus ids repeat across identical servers): ranks on one GPU
  // cannot share an NCCL communicator.
  static std::string gpu_identity(const Device& gpu);

  // Collective: every rank of `ranks` constructs its own with the same `id`.
  GpuAllReduce(const Device& gpu, const std::vector<char>& id, int ranks, int rank);
  ~GpuAllReduce();
  GpuAllReduce(const GpuAllReduce&) = delete;
  GpuAllReduce& operator=(const GpuAllReduce&) = delete;

  // Starts summing the `count` floats at `gpu` over the ranks (in place),
  // behind the last mark (mark_gradients_queued), and copying the sum to
  // `host`; every rank starts its sums in the same order.
  // Returns at once a test of whether the sum has landed in `host`.
  std::function<bool()> sum_to_host(float* gpu, float* host, size_t count);

  // Records, on the GPU's compute stream, that the work queued there so far
  // has produced the gradients about to be reported: the means started from
  // now on wait for it on the GPU. Called by the thread that runs backward.
  void mark_gradients_queued();
  // The bf16 wire's buffer on the GPU, `count` 16-bit numbers (kept, grown
  // only where a larger one is asked for before the first mean).
  uint16_t* wire_buffer(size_t count);
  // Starts averaging the `count` floats at `gpu` over the ranks in place on
  // the communicator's stream, behind the last mark: summed by NCCL, then
  // multiplied by 1 / ranks, as the host path multiplies the landed sum.
  // With `wire` (GPU memory of `count` 16-bit numbers) the floats are
  // rounded to bf16 there, NCCL sums those in bf16, and the sum is widened
  // back before the multiply. Every rank starts its means in the same order.
  // Returns at once a test of whether the mean is in place.
  std::function<bool()> mean_in_place(float* gpu, size_t count, uint16_t* wire = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace poseidon::dist
