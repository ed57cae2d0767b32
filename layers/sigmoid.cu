// Sigmoid on the GPU (see sigmoid.h and activation_cuda.cuh).
#include "core/registry.h"
#include "layers/activation_cuda.cuh"
#include "layers/sigmoid.h"

namespace poseidon {

using SigmoidCudaLayer = ActivationCudaLayer<SigmoidMath>;
POSEIDON_REGISTER_CUDA_LAYER(SigmoidCudaLayer, "sigmoid");

}  // namespace poseidon
