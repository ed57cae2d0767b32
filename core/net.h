// Net: the layer graph of a model file. Builds layers from YAML, orders them
// topologically, infers shapes, allocates blobs, keeps every learnable
// parameter in one flat buffer and every gradient in another, and runs
// forward and backward, reporting each finished gradient to a GradSink.
//
// Model file:
//   name: lenet
//   inputs: {data: [1, 28, 28], label: []}   # per-sample shapes
//   layers:
//     - {name: conv1, type: conv, inputs: data, num_output: 20, kernel_size: 5}
//     - ...
// `vars` and parameterised `blocks` (core/config_blocks.h) are expanded into
// plain layers before the graph is built.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/config_node.h"
#include "core/events.h"
#include "core/layer.h"
#include "core/layer_runner.h"

namespace poseidon {

struct Blob {
  std::string name;
  Tensor value;
  Tensor grad;             // allocated only when some layer needs it
  bool needs_grad = false; // a differentiable path leads from it to a loss
  int producer = -1;       // layer index, -1 for a net input
  // The output of a ReLU fused into its input's producer (Net::fuse_relus):
  // the index of that input blob, whose value and gradient tensors this blob
  // shares. -1 otherwise.
  int shares = -1;
  // A float32 copy of a bfloat16 blob for the layers that read float32
  // (core/blob_types.h), widened after the blob's writer runs, and its
  // gradient, which those readers add into and backward rounds into `grad`
  // once the last of them has run. Undefined where no such layer reads it.
  Tensor f32_value, f32_grad;
};

class Net {
 public:
  // Blobs, parameters and layers live on `device` (GPU layers for "cuda").
  Net(const ConfigNode& model, int64_t batch, Device device = {});
  // The graph, every blob's shape and the parameters' declarations, with no
  // blob, gradient or parameter allocated (on the CPU): for estimating what a
  // model needs before it is built (core/model_summary.h). Not runnable.
  // With memory_bytes > 0, the first tensor too large for that memory on its
  // own (a net input or a layer's output at memory_batch, a layer's
  // parameters) is a ConfigError at the key that sets its size, raised
  // before a later layer fails on it (core/net_budget.cpp).
  struct ShapesOnly {
    double memory_bytes = 0;
    int64_t memory_batch = 0;  // 0: the net's batch
    std::string memory_name;   // "this machine's 23.00 GiB of memory"
  };
  // What that check throws: its message already names the batch that
  // counts, so no build at another batch is needed to explain it.
  class BeyondMemory : public ConfigError {
   public:
    using ConfigError::ConfigError;
  };
  Net(const ConfigNode& model, int64_t batch, ShapesOnly only);

  const std::string& name() const { return name_; }
  int64_t batch() const { return batch_; }
  const Device& device() const { return device_; }
  // Changes the batch size: re-infers every shape; parameters are kept.
  void reshape(int64_t batch);
  // Offers `precision` to every layer (core/precision.h; a layer's own
  // `precision` key wins) and reshapes them so that they set up their
  // kernels for it. tf32 runs on a GPU, bf16 on the
  // CPU and on GPUs of compute capability 8.0 or later; asking for either
  // elsewhere throws Error.
  void set_precision(Precision precision);
  Precision precision() const { return precision_; }

  // Fuses each ReLU into the layer that produces its input, where that layer
  // can apply it (core/relu_fusion.h: batch norm and sum on the CPU) and no
  // other layer reads that input, nor is its name in `keep`. The ReLU's
  // output blob then shares the producer's output tensors, value and
  // gradient, and the ReLU layer no longer runs (fused(i)). The fused input
  // blob keeps its name but holds the ReLU'd values from then on: a caller
  // that reads a blob's values before a ReLU names it in `keep`. Returns how
  // many ReLUs were fused; calling it again fuses nothing more.
  int fuse_relus(const std::set<std::string>& keep = {});
  // Whether layer i is a ReLU fused into its input's producer.
  bool fused(size_t i) const { return i < fused_.size() && fused_[i]; }

  // Runs every layer; returns the weighted sum of the loss outputs.
  // Equal to run_forward, loss and check_forward in turn.
  float forward(RunContext& ctx, GradSink* gate = nullptr);
  // Queues every layer's forward work without waiting for a GPU.
  void run_forward(RunContext& ctx, GradSink* gate = nullptr);
  // The weighted sum of the loss outputs: each term's weight times the
  // first element of its blob, added in float in loss_terms' order (a
  // GPU's values are read, waiting for its work so far).
  float loss() const;
  struct LossTerm {
    float weight;
    const Tensor* value;
  };
  std::vector<LossTerm> loss_terms() const;
  // The layers' checks of the oldest forward not yet checked (a GPU loss
  // layer's label check, brought back without a wait of its own:
  // Layer::after_forward); throws what they find.
  void check_forward();
  // Runs backward from the loss outputs, reporting gradients to `sink`.
  void backward(RunContext& ctx, GradSink& sink);
  // Single-layer steps, for per-layer timing.
  void forward_layer(size_t i, RunContext& ctx);
  void backward_layer(size_t i, RunContext& ctx);
  // What runs the layers' bodies from now on (core/layer_runner.h). Null:
  // the layers' own code.
  void set_layer_runner(std::unique_ptr<LayerRunner> runner) { runner_ = std::move(runner); }
  // Zeroes the blob gradients that backward adds into; those whose first
  // writer overwrites them (LayerIO::in_grad_unset) are left as they are.
  void zero_blob_grads();
  void seed_loss_grads();

  // Deterministic initialisation of all parameters and buffers from `seed`.
  void init_params(uint64_t seed);

  const std::vector<std::string>& input_names() const { return input_names_; }
  const Shape& input_sample_shape(const std::string& name) const;
  Blob& blob(const std::string& name);
  bool has_blob(const std::string& name) const { return blob_index_.count(name) > 0; }
  const std::vector<Blob>& blobs() const { return blobs_; }
  // The bytes the blobs hold now: values, gradients and float32 copies, a
  // tensor shared by a fused ReLU's output counted once.
  int64_t blob_bytes() const;
  size_t num_layers() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  const Layer& layer(size_t i) const { return *layers_[i]; }
  std::vector<Shape> layer_input_shapes(size_t i) const;
  std::vector<Shape> layer_output_shapes(size_t i) const;
  // The element type of layer i's k-th output (core/blob_types.h), and
  // whether a float32 layer reads it through a float32 copy.
  DType output_type(size_t i, size_t k) const { return blob_types_[layer_out_[i][k]]; }
  bool output_copied_to_f32(size_t i, size_t k) const;
  // Whether backward needs the gradient of layer i's k-th output.
  bool output_needs_grad(size_t i, size_t k) const { return blobs_[layer_out_[i][k]].needs_grad; }
  bool runs_backward(size_t i) const { return runs_backward_[i]; }

  // Scalar outputs: losses (weighted into forward's result) and metrics.
  const std::vector<std::string>& loss_outputs() const { return loss_outputs_; }
  const std::vector<std::string>& metric_outputs() const { return metric_outputs_; }

  // All parameters (learnable and buffers) in layer order.
  std::vector<Param*> params();
  Param* find_param(const std::string& name);
  int64_t num_learnable() const;  // element count of the learnable parameters
  Tensor& flat_values() { return flat_values_; }
  Tensor& flat_grads() { return flat_grads_; }
  Tensor& flat_buffers() { return flat_buffers_; }  // every buffer (running statistics)

 private:
  void build_graph(const ConfigNode& model);
  void order_layers(const ConfigNode& layers_node);
  // A layer's own `precision` key (Layer::own_precision), checked against
  // the layer and the device and applied as the layer is built.
  void apply_own_precision(Layer& layer, const ConfigNode& config) const;
  void infer_shapes();
  // ShapesOnly's memory check of the net inputs (layer < 0) or of one
  // layer's parameters and outputs.
  void require_fits_alone(int layer) const;
  std::vector<Shape> reshape_layer(size_t i);  // Layer::reshape, its errors naming the `if` that keeps it
  void mark_gradient_paths();
  void bind_params();
  void share_fused_blobs();  // after any (re)allocation of blobs
  // Layer i's view of its inputs' types: the blob's, or float32 where it
  // reads a float32 copy. Decides the types of layer i's outputs.
  void assign_blob_types(size_t i);
  // Widens the float32 copies of layer i's outputs (forward) and rounds
  // the copies' gradients whose last reader in backward is layer i.
  void widen_outputs(size_t i);
  void round_copied_grads(size_t i);
  void plan_input_grad_writes();  // after gradient paths or fusion change

  std::string name_;
  int64_t batch_ = 0;
  Device device_;
  Precision precision_ = Precision::fp32;
  std::vector<std::string> input_names_;
  std::map<std::string, Shape> input_shapes_;
  std::map<std::string, ConfigNode> input_nodes_;  // where each input's shape is written
  std::vector<std::unique_ptr<Layer>> layers_;  // topological order
  std::vector<Blob> blobs_;
  std::vector<Shape> blob_shapes_;  // as of the last infer_shapes, also when not allocated
  bool allocated_ = true;           // false: ShapesOnly
  ShapesOnly budget_;               // ShapesOnly's memory check; none when memory_bytes is 0
  std::map<std::string, size_t> blob_index_;
  std::vector<std::vector<size_t>> layer_in_, layer_out_;  // blob indices
  std::vector<bool> runs_backward_;
  std::vector<bool> fused_;  // per layer: a ReLU fused into its input's producer
  std::vector<bool> grad_overwritten_;  // per blob: its first writer in backward overwrites it (not zeroed)
  std::vector<DType> blob_types_;       // as of the last infer_shapes
  std::vector<std::vector<bool>> reads_copy_;      // per layer and input: reads the blob's float32 copy
  std::vector<std::vector<size_t>> rounds_after_;  // per layer: blobs whose f32_grad is rounded after its backward
  std::vector<std::string> loss_outputs_, metric_outputs_;
  std::map<std::string, std::string> switched_by_;  // layer -> the model variable whose `if` keeps it
  Tensor flat_values_, flat_grads_, flat_buffers_;
  std::vector<LayerIO> io_;
  std::unique_ptr<LayerRunner> runner_;  // null: the layers' own code
};

}  // namespace poseidon
