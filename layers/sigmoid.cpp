// Sigmoid on the CPU (see sigmoid.h and activation.h).
#include "layers/sigmoid.h"

#include "core/registry.h"
#include "layers/activation_loops.h"

namespace poseidon {

template class ActivationLayer<SigmoidMath>;

POSEIDON_REGISTER_LAYER(SigmoidLayer, "sigmoid", "logistic sigmoid, 1 / (1 + exp(-x))", {});

}  // namespace poseidon
