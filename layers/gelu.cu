// GELU on the GPU (see gelu.h and activation_cuda.cuh).
#include "core/registry.h"
#include "layers/activation_cuda.cuh"
#include "layers/gelu.h"

namespace poseidon {

using GeluCudaLayer = ActivationCudaLayer<GeluMath>;
POSEIDON_REGISTER_CUDA_LAYER(GeluCudaLayer, "gelu");

}  // namespace poseidon
