// Leaky ReLU on the CPU (see leaky_relu.h and activation.h).
#include "layers/leaky_relu.h"

#include "core/registry.h"
#include "layers/activation_loops.h"

namespace poseidon {

template class ActivationLayer<LeakyReluMath>;

POSEIDON_REGISTER_LAYER(LeakyReluLayer, "leaky_relu", "leaky rectified linear unit, x or negative_slope * x",
                        {{"negative_slope", "float", "0.01", "multiplier of negative inputs"}});

}  // namespace poseidon
