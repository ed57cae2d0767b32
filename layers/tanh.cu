// Tanh on the GPU (see tanh.h and activation_cuda.cuh).
#include "core/registry.h"
#include "layers/activation_cuda.cuh"
#include "layers/tanh.h"

namespace poseidon {

using TanhCudaLayer = ActivationCudaLayer<TanhMath>;
POSEIDON_REGISTER_CUDA_LAYER(TanhCudaLayer, "tanh");

}  // namespace poseidon
