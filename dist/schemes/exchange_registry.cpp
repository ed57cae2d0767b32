// The schemes' factories, by scheme.
#include "dist/schemes/exchange_registry.h"

namespace poseidon::dist {

ExchangeRegistry& ExchangeRegistry::instance() {
  static ExchangeRegistry registry;
  return registry;
}

std::unique_ptr<Exchange> ExchangeRegistry::create(const ExchangeSetup& setup, const SyncGroup& group) const {
  auto it = makers_.find(group.scheme);
  if (it == makers_.end()) throw Error("no exchange is registered for scheme " + scheme_name(group.scheme));
  return it->second(setup, group);
}

}  // namespace poseidon::dist
