// Tanh on the CPU (see tanh.h and activation.h).
#include "layers/tanh.h"

#include "core/registry.h"
#include "layers/activation_loops.h"

namespace poseidon {

template class ActivationLayer<TanhMath>;

POSEIDON_REGISTER_LAYER(TanhLayer, "tanh", "hyperbolic tangent, tanh(x)", {});

}  // namespace poseidon
