// What a model is and what training it costs, computed before it is built:
// per layer the output shapes, parameters and FLOPs at a batch, and the
// memory that training holds (parameters, gradients, solver state,
// activations). `poseidon summary` prints it; `poseidon train` and `time`
// refuse, before any work, a model whose estimate exceeds the device's
// memory (require_memory), instead of failing in an allocation mid-way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/device.h"
#include "core/precision.h"
#include "core/tensor.h"

namespace poseidon {

// Bytes training holds for one layer: parameters, their gradients and the
// solver's state in float32, activations in their blobs' types (bfloat16
// under bf16, with the float32 copies of core/blob_types.h where
// float32 layers read them). Layers' own
// working buffers (im2col columns, dropout masks) are not counted, so the
// estimate is a floor.
struct LayerMemory {
  double parameters = 0;    // learnable values and buffers (running statistics)
  double gradients = 0;     // of the learnable values
  double solver_state = 0;  // one momentum buffer per learnable value, with momentum
  double activations = 0;   // the outputs, and their gradients where backward needs them
  double total() const { return parameters + gradients + solver_state + activations; }
  LayerMemory& operator+=(const LayerMemory& other);
};

struct LayerSummary {
  std::string name, type;
  SourceLocation location;     // the layer in the model file
  std::vector<Shape> outputs;  // at the batch
  int64_t params = 0;          // learnable values
  double flops = 0;            // one forward pass at the batch
  LayerMemory memory;
};

struct ModelSummary {
  std::string name;
  int64_t batch = 0;
  bool momentum = true;         // solver state counted
  SourceLocation inputs_location;
  LayerMemory inputs;           // the net's input blobs (activations)
  std::vector<LayerSummary> layers;
  int64_t params() const;
  double flops() const;
  LayerMemory memory() const;   // inputs and every layer
};

// Summarises `model` at `batch`, with a momentum buffer per parameter when
// `momentum`. No blob, gradient or parameter is allocated (the layers' own
// working buffers are, for one example), so this works for models far too
// large for the machine; an invalid model throws the same ConfigError as
// building it would.
// With `memory_bytes` > 0 (what the device has, `memory_name` saying so:
// "this machine's 23.00 GiB of memory"), the first net input, layer output or
// parameter that alone exceeds it is a ConfigError at the key that sets its
// size (Net::ShapesOnly). `blobs` is the run's precision, whose blob types
// count (bf16: core/blob_types.h, on the CPU and a GPU alike).
ModelSummary summarize_model(const ConfigNode& model, int64_t batch, bool momentum, double memory_bytes = 0,
                             const std::string& memory_name = "", Precision blobs = Precision::fp32);

// "this machine's 23.00 GiB of memory", "the 80.00 GiB of GPU cuda:0".
std::string memory_name(const Device& device, double bytes);

// Bytes of memory `device` has: the machine's physical memory (or the
// container's limit when lower) for the CPU, the GPU's own for cuda:N;
// 0 when unknown.
double device_memory_bytes(const Device& device);

// A ConfigError, located at the layer (or the inputs) that needs the most,
// when the summary's training memory exceeds `available` bytes on `device`:
// it names the bytes needed, their parts and what the device has.
void require_memory(const ModelSummary& summary, const Device& device, double available);

// "1.50 GiB" (powers of 1024, as memory is counted).
std::string bytes_text(double bytes);

}  // namespace poseidon
