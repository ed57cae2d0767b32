// Checkpoints: a Net's parameters and buffers, the Solver's state and the
// caller's metadata (iteration, loader position, RNG state) in one
// safetensors file, under PyTorch's names and layouts ("conv1.weight" OIHW,
// "fc1.weight" [out, in], "bn1.running_mean"), so weights move both ways.
// Solver state is stored under PyTorch's names, "optimizer.<param
// name>.<state name>" ("momentum_buffer"; "exp_avg", "exp_avg_sq" and "step"; ...).
// Entries named "compression.*" are the state of gradient compression
// (dist/schemes/lowrank.h), which the caller streams into the file and reads back
// in whatever parts it needs: they can be far larger than the model.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/net.h"
#include "core/safetensors.h"
#include "core/solver.h"

namespace poseidon {

// Saves every parameter and buffer of `net`, the state of `solver` when it is
// not null, `metadata` and the `compression` entries (written last, in order,
// while they are produced). Atomic: a crash never leaves a torn file at `path`.
void save_checkpoint(const std::string& path, Net& net, const Solver* solver,
                     const std::map<std::string, std::string>& metadata,
                     const std::vector<StreamedTensor>& compression = {});

// The prefix of compression state entries.
inline const std::string kCompressionPrefix = "compression.";

// The metadata entry that lists the layers of the net a checkpoint was saved
// from ("conv1:conv,relu1:relu,..."; save_checkpoint writes it), so that
// weights loaded into a model that differs only in layers without
// parameters are noticed.
inline const std::string kLayersMetadata = "layers";
std::string layer_list(const Net& net);

// The layers of `net` that the checkpoint's list lacks ("relu2 (relu)"), and
// those the list has that `net` lacks; both empty when the metadata has no list.
struct LayerMismatch {
  std::vector<std::string> missing;  // in the net, not in the weights
  std::vector<std::string> extra;    // in the weights, not in the net
};
LayerMismatch compare_checkpoint_layers(const std::map<std::string, std::string>& metadata, const Net& net);

// Loads every parameter and buffer of `net` (each must be present with the
// same shape) and, when `solver` is not null, replaces its state with the
// file's "optimizer.*" entries. Tensors the net does not have are an error
// unless they are PyTorch's "*num_batches_tracked" or "optimizer.*" entries.
// Nothing is changed when the file does not fit. Returns the metadata; the
// "compression.*" entries go, unread, to `compression` when it is not null.
std::map<std::string, std::string> load_checkpoint(const std::string& path, Net& net, Solver* solver,
                                                   std::map<std::string, DeferredTensor>* compression = nullptr);

}  // namespace poseidon
