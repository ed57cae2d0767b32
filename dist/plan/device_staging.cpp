// The per-layer choice between the device and host staging, and the bf16
// buckets' slices (see device_staging.h).
#include "dist/plan/device_staging.h"

#include <algorithm>

#include "core/error.h"

namespace poseidon::dist {

bool scheme_needs_host(Scheme scheme) {
  switch (scheme) {
    case Scheme::allreduce:
      return false;
    case Scheme::ps:
    case Scheme::sfb:
    case Scheme::lowrank:
      return true;
  }
  return true;
}

std::vector<bool> layers_needing_host(const CommPlan& plan, bool device_transport) {
  std::vector<bool> needs(plan.layer_groups.size(), false);
  for (size_t layer = 0; layer < plan.layer_groups.size(); ++layer)
    for (size_t g : plan.layer_groups[layer]) {
      POSEIDON_CHECK(g < plan.groups.size()) << "layer " << layer << " names group " << g;
      if (!device_transport || scheme_needs_host(plan.groups[g].scheme)) needs[layer] = true;
    }
  return needs;
}

bool any_layer_needs_host(const CommPlan& plan, bool device_transport) {
  const std::vector<bool> needs = layers_needing_host(plan, device_transport);
  return std::find(needs.begin(), needs.end(), true) != needs.end();
}

void exchange_unstaged_on_device(CommPlan& plan, const std::vector<bool>& staged, Net& device_net) {
  POSEIDON_CHECK(staged.size() == device_net.num_layers())
      << staged.size() << " layers decided for a net of " << device_net.num_layers();
  for (PlannedParam& planned : plan.params) {
    if (staged.at(planned.layer)) continue;
    Layer& layer = device_net.layer(planned.layer);
    Param* found = nullptr;
    for (Param& p : layer.params())
      if (p.name == planned.param->name) found = &p;
    POSEIDON_CHECK(found && found->value.numel() == planned.param->value.numel())
        << "parameter '" << planned.param->name << "' is not in layer '" << layer.name() << "' of the device net";
    planned.param = found;
  }
}

void place_solver_state(Solver& solver, const CommPlan& plan) {
  for (const PlannedParam& planned : plan.params) {
    auto it = solver.state().find(planned.param->name);
    if (it == solver.state().end() || !it->second.defined()) continue;
    const Device& home = planned.param->value.device();
    if (!(it->second.device() == home)) it->second = it->second.to(home);
  }
}

int64_t DeviceWireSlices::reserve(int64_t count) {
  POSEIDON_CHECK(count > 0) << "a bf16 bucket of " << count << " elements";
  const int64_t begin = total_;
  total_ = (begin + count + kAlignElements - 1) / kAlignElements * kAlignElements;
  return begin;
}

}  // namespace poseidon::dist
