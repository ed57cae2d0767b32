// The Layer contract. A layer is built from its YAML config, infers output
// shapes from input shapes (reshape), runs forward, and in backward accumulates
// input gradients and writes its parameter gradients. Parameters are declared
// by the layer and owned by the Net, which binds them into flat buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/precision.h"
#include "core/rounded_weight.h"
#include "core/tensor.h"

namespace poseidon {

enum class Phase { train, test };

// Per-run state handed to layers: no globals for mode or device.
struct RunContext {
  Phase phase = Phase::train;
  std::mt19937_64* rng = nullptr;  // for stochastic layers (dropout)
  Device device;
};

// How a parameter is initialised. "default" is PyTorch's: uniform in
// +-1/sqrt(fan_in) for weights and biases alike.
struct ParamInit {
  std::string type = "default";  // default, constant, uniform, gaussian, xavier, msra
  float value = 0.f;             // constant
  float low = -0.05f, high = 0.05f;
  float std = 0.01f;             // gaussian
  int64_t fan_in = 1;            // set by the layer
  int64_t fan_out = 1;

  static ParamInit parse(const ConfigNode& node);
};

struct Param {
  std::string name;    // "<layer>.<suffix>": the checkpoint key (PyTorch naming)
  Shape shape;
  ParamInit init;
  bool learnable = true;  // false: a buffer such as running statistics
  float lr_mult = 1.f;
  float decay_mult = 1.f;
  Tensor value;  // views into the Net's flat buffers
  Tensor grad;   // empty for buffers
  // Set by the layer's backward when its operands prove this gradient finite
  // (core/finite_check.h), so the finite check need not read it; cleared
  // whenever it cannot prove it.
  bool grad_bounded = false;
  // Under bf16, the value rounded to bfloat16 for a layer that multiplies
  // it so: written by the update, read by the layer (core/rounded_weight.h).
  RoundedWeight rounded;
};

// Tensors of one forward or backward call. In backward, in_grad[i] is null for
// inputs that need no gradient; layers add to it (+=), never overwrite.
// Parameter gradients are overwritten, except those the Net says nobody reads
// this iteration (the sink that receives them forms them itself).
struct LayerIO {
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  std::vector<const Tensor*> out_grad;
  std::vector<Tensor*> in_grad;
  std::vector<bool> skip_param_grad;  // per parameter; empty: write every one
  // Per input, set by the Net for layers whose writes_input_grads() is true:
  // in_grad[k] holds nothing yet this backward (stale values), so the layer
  // writes every element of it (=) instead of adding. The Net sets it for the
  // first layer in backward's order to reach a gradient and then does not
  // zero that gradient first. Empty: add to every input gradient.
  std::vector<bool> in_grad_unset;

  bool writes_param_grad(size_t k) const { return k >= skip_param_grad.size() || !skip_param_grad[k]; }
  bool overwrites_input_grad(size_t k) const { return k < in_grad_unset.size() && in_grad_unset[k]; }
};

class Layer {
 public:
  explicit Layer(const ConfigNode& config);
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  const std::vector<std::string>& inputs() const { return inputs_; }
  const std::vector<std::string>& outputs() const { return outputs_; }
  const ConfigNode& config() const { return config_; }
  // Used by the Net: a layer without `inputs` reads the previous layer's outputs.
  void set_default_inputs(const std::vector<std::string>& inputs);

  // Checks the input shapes and returns the output shapes. Called at build
  // time and again whenever input shapes change (e.g. another batch size).
  virtual std::vector<Shape> reshape(const std::vector<Shape>& in) = 0;
  virtual void forward(LayerIO& io, RunContext& ctx) = 0;
  virtual void backward(LayerIO& io, RunContext& ctx) {}
  // Called by Net::check_forward (Net::forward's last part, or the trainer
  // reading a step late) once the host has read the losses, which waits for
  // the device: a GPU layer that checks its inputs on the device (class
  // labels) throws here what the CPU layer throws in forward, without a host
  // synchronisation of its own.
  virtual void after_forward() {}

  // Multiply-adds x2 of one forward pass over the given input shapes.
  virtual int64_t forward_flops(const std::vector<Shape>& in) const { return 0; }
  // Nonzero for layers whose (scalar) output is a term of the objective.
  virtual float loss_weight() const { return 0.f; }
  // False for layers that never propagate gradients (accuracy).
  virtual bool differentiable() const { return true; }
  // True for layers whose backward honours LayerIO::in_grad_unset, which
  // spares a pass zeroing the gradient and the layer's read of it.
  virtual bool writes_input_grads() const { return false; }
  // Which of its implementations the layer runs, for layers with several
  // (the conv layer's "onednn", "winograd", ...); empty otherwise.
  // `poseidon time --json` reports it per layer.
  virtual std::string engine() const { return ""; }
  // False for a layer whose GPU forward or backward cannot be recorded into
  // a CUDA graph (core/graphed_step.h) and replayed: one that waits for the
  // host, reads on the host a value that changes every step, or requests
  // memory in a steady step. A net with such a layer runs its steps
  // uncaptured, and the log names the layer.
  virtual bool capturable() const { return true; }
  // Allowed input counts (min, max); -1 max means unbounded.
  virtual std::pair<int, int> input_count() const { return {1, 1}; }
  virtual int output_count() const { return 1; }

  // The precision this layer computes in. A layer without a path for the
  // run's precision stays correct in float32: it reads and writes float32
  // blobs, and the Net casts any bfloat16 blob at its edges
  // (core/blob_types.h); one with a path (conv, fc: bf16) converts its
  // operands inside its kernels. The Net offers the
  // run's precision to every layer, then reshapes them all, so a layer sets
  // up its kernels for precision() in reshape.
  //
  // A layer's own `precision` key (fp32 or bf16) overrides the run's for it,
  // as a region in or out of autocast does: `precision: fp32` keeps a
  // sensitive layer in float32 under a bf16 run. The Net refuses a key the
  // layer has no path for, and fp32 under a tf32 run (TF32 is the GPU's
  // math for every layer of the run).
  Precision precision() const { return precision_; }
  const std::optional<Precision>& own_precision() const { return own_precision_; }
  void set_precision(Precision run) {
    const Precision p = own_precision_.value_or(run);
    precision_ = supports_precision(p) ? p : Precision::fp32;
  }
  virtual bool supports_precision(Precision p) const { return p == Precision::fp32; }

  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  Param& param(size_t i) { return params_.at(i); }

 protected:
  // Declares (first call) or re-checks (later calls) a parameter. `suffix` is
  // "weight", "bias", "running_mean", ...; init keys are read from the config
  // as "<suffix>_init" for learnable parameters.
  Param& declare_param(const std::string& suffix, const Shape& shape, ParamInit init,
                       bool learnable = true);
  // Raises a ConfigError located at this layer's config (or at `key` in it).
  [[noreturn]] void fail(const std::string& what, const std::string& key = "") const;

 private:
  ConfigNode config_;
  std::string name_, type_;
  std::vector<std::string> inputs_, outputs_;
  std::vector<Param> params_;
  Precision precision_ = Precision::fp32;
  std::optional<Precision> own_precision_;
};

}  // namespace poseidon
