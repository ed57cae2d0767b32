// GELU on the CPU (see gelu.h and activation.h).
#include "layers/gelu.h"

#include "core/registry.h"
#include "layers/activation_loops.h"

namespace poseidon {

template class ActivationLayer<GeluMath>;

POSEIDON_REGISTER_LAYER(GeluLayer, "gelu", "Gaussian error linear unit, x * Phi(x) (PyTorch's nn.GELU)",
                        {{"approximate", "string", "none",
                          "none: the exact erf form; tanh: the tanh approximation (PyTorch's approximate='tanh')"}});

}  // namespace poseidon
