// Leaky ReLU on the GPU (see leaky_relu.h and activation_cuda.cuh).
#include "core/registry.h"
#include "layers/activation_cuda.cuh"
#include "layers/leaky_relu.h"

namespace poseidon {

using LeakyReluCudaLayer = ActivationCudaLayer<LeakyReluMath>;
POSEIDON_REGISTER_CUDA_LAYER(LeakyReluCudaLayer, "leaky_relu");

}  // namespace poseidon
