// What the compression tests train with: LeNet, the solver settings, a
// synthetic data set that can be learnt, and a hash of parameters to compare
// ranks by.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/net.h"
#include "core/solver.h"

namespace poseidon::testing {

// LeNet, as models/lenet.yaml has it.
inline ConfigNode lenet_config() { return ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml"); }

inline SolverConfig solver_config(const std::string& type, int iterations) {
  SolverConfig c;
  c.type = type;
  c.momentum = type == "sgd" ? 0.9 : 0.0;
  c.weight_decay = 5e-4;
  c.lr.base_lr = type == "sgd" ? 0.01 : 0.001;
  c.lr.policy = "cosine";
  c.lr.max_iter = iterations;
  c.max_iter = iterations;
  return c;
}

// Example `e` of an endless synthetic set: label e mod 10, and an image that
// is its class's fixed pattern plus seeded noise, so the net learns something
// and its gradients are not dominated by fitting noise.
inline void fill_examples(Net& net, int64_t first) {
  Tensor& data = net.blob("data").value;
  Tensor& label = net.blob("label").value;
  const int64_t per = data.numel() / data.dim(0);
  for (int64_t k = 0; k < data.dim(0); ++k) {
    const int64_t e = first + k, cls = e % 10;
    std::mt19937 pattern(static_cast<uint32_t>(cls)), noise(static_cast<uint32_t>(1000 + e));
    std::uniform_real_distribution<float> unit(0.f, 1.f);
    for (int64_t i = 0; i < per; ++i) data[k * per + i] = unit(pattern) + 0.5f * unit(noise);
    label[k] = static_cast<float>(cls);
  }
}

inline uint64_t hash_of(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace poseidon::testing
