// A convolution's weight gradient as one oneDNN primitive per part of the
// batch, each made for and run on one thread, the parts' gradients summed
// after. oneDNN 2.6's bfloat16 backward-weights kernel for strided
// convolutions on AVX-512 BF16 synchronises its threads at spinning
// barriers: where the cores are shared (another process, a build beside
// training) a waiting thread spins through the time slice of the one it
// waits for, and a call that takes 3 ms on a quiet machine takes 450 to
// 500 ms (resnet_small's stride-2 3x3 layers, 2 threads, two busy
// processes beside it). One-thread parts meet only at the end of the
// OpenMP loop, whose threads sleep when they have waited long. The parts
// are fixed when the layer is made and summed in their order, so the
// gradient does not depend on how many threads run them or when.
#pragma once

#ifdef POSEIDON_HAVE_DNNL

#include <dnnl.hpp>
#include <memory>
#include <vector>

namespace poseidon {

class SplitWeightGrad {
 public:
  struct Geometry {
    dnnl::memory::dims strides, dilates, pad;  // as the convolution's descriptors take them
  };
  // The weight (and bias) gradient of `whole`'s convolution over `parts`
  // consecutive runs of its batch's images, in `whole`'s layouts of x, dy,
  // dw and db. Null where those layouts do not hold each image in one
  // contiguous piece with the images outermost, where oneDNN has only
  // reference kernels for a part, or for fewer than 2 parts.
  static std::unique_ptr<SplitWeightGrad> create(const dnnl::convolution_backward_weights::primitive_desc& whole,
                                                 const Geometry& geometry, int parts);
  ~SplitWeightGrad();

  int parts() const;
  // dw, and db when not null, overwritten, from x and dy, each pointing at
  // data in `whole`'s layout.
  void run(const void* x, const void* dy, float* dw, float* db);

 private:
  struct Part;
  SplitWeightGrad() = default;

  std::vector<Part> parts_;
  // The gradients of the parts after the first, which run() adds into the first's.
  std::vector<const float*> later_dw_, later_db_;
  int64_t x_image_bytes_ = 0, dy_image_bytes_ = 0, dw_floats_ = 0, db_floats_ = 0;
};

// Whether a backward-weights implementation of oneDNN is one whose threads
// spin at barriers as above: its bfloat16 kernel on AVX-512 BF16 for a
// convolution with a stride above 1.
bool spins_between_threads(const char* impl, const dnnl::memory::dims& strides);

}  // namespace poseidon

#endif  // POSEIDON_HAVE_DNNL
