// GPU facts in a build without the CUDA backend (core/cuda/device_info.cpp
// answers in a build with it).
#include "core/device_info.h"

#ifndef POSEIDON_HAVE_CUDA

namespace poseidon::device_info {

std::vector<Library> cuda_libraries() { return {}; }
std::vector<Gpu> visible_gpus() { return {}; }

}  // namespace poseidon::device_info

#endif
