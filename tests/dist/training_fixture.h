// What the dist tests that train share: the models (LeNet, and VGG19-22K at
// reduced width and input size), the solver settings, a synthetic data set
// that can be learnt, and a hash of parameters to compare ranks by.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/net.h"
#include "core/solver.h"

namespace poseidon::testing {

// "lenet", or "vgg": vgg19_22k's 16 convolutions, 5 pools and 3 FC layers at
// 32x32, 8 to 16 channels, FC widths 32 and 10 classes, without dropout.
inline ConfigNode model_config(const std::string& model) {
  if (model == "lenet") return ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/lenet.yaml");
  ConfigNode vgg = ConfigNode::load_file(POSEIDON_SOURCE_DIR "/models/vgg19_22k.yaml");
  for (const char* o :
       {"vars.size=32", "vars.num_classes=10", "vars.dropout=0", "layers.0.out=8", "layers.1.out=8", "layers.2.out=16",
        "layers.3.out=16", "layers.4.out=16", "layers.6.num_output=32", "layers.9.num_output=32"})
    apply_override(vgg.yaml(), o);
  return vgg;
}

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
