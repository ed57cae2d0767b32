// The registry of schemes: each scheme's file (ps.cpp, sfb.cpp, allreduce.cpp,
// lowrank.cpp) registers how its exchange is built from a sync group with one
// POSEIDON_REGISTER_EXCHANGE line, as layers register with core/registry.h,
// and the scheduler asks the registry for each group of the plan. The
// schemes' archive is linked whole, so every registration is in the program.
#pragma once

#include <functional>
#include <map>
#include <memory>

#include "core/net.h"
#include "core/solver.h"
#include "dist/plan/dist_config.h"
#include "dist/plan/plan.h"
#include "dist/runtime/comm.h"
#include "dist/runtime/device_transport.h"
#include "dist/runtime/exchange.h"
#include "dist/runtime/host_transport.h"
#include "dist/schemes/exchange_compute.h"

namespace poseidon::dist {

// What an exchange may be built from.
struct ExchangeSetup {
  Net& net;                        // the net whose gradients are exchanged: a GPU net's host mirror (where the
                                   // plan's parameters of layers exchanged on the GPU are the GPU net's:
                                   // dist/plan/device_staging.h), or the GPU net itself where no layer
                                   // needs the host
  const CommPlan& plan;
  Solver& solver;
  ExchangeCompute& compute;
  const Comm& comm;                // the run's; a collective scheme duplicates it for a communicator of its own
  HostTransport& shared;           // over `comm`, with dist.order's queue: the parameter server's
  DeviceTransport* device_sums;    // sums on the devices (NCCL), or null
  const DistConfig& config;
  int ranks_per_host;              // two_level's hosts
};

using ExchangeFactory = std::function<std::unique_ptr<Exchange>(const ExchangeSetup& setup, const SyncGroup& group)>;

class ExchangeRegistry {
 public:
  static ExchangeRegistry& instance();
  void add(Scheme scheme, ExchangeFactory make) { makers_[scheme] = std::move(make); }
  bool has(Scheme scheme) const { return makers_.count(scheme) > 0; }
  // The exchange of `group`, by the factory its scheme registered.
  std::unique_ptr<Exchange> create(const ExchangeSetup& setup, const SyncGroup& group) const;

 private:
  std::map<Scheme, ExchangeFactory> makers_;
};

struct ExchangeRegistrar {
  ExchangeRegistrar(Scheme scheme, ExchangeFactory make) { ExchangeRegistry::instance().add(scheme, std::move(make)); }
};

}  // namespace poseidon::dist

#define POSEIDON_EXCHANGE_CONCAT_(a, b) a##b
#define POSEIDON_EXCHANGE_CONCAT(a, b) POSEIDON_EXCHANGE_CONCAT_(a, b)
#define POSEIDON_REGISTER_EXCHANGE(scheme, factory)                                                   \
  static const ::poseidon::dist::ExchangeRegistrar POSEIDON_EXCHANGE_CONCAT(exchange_registrar_, __LINE__)( \
      scheme, factory)
