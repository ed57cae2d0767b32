// dist/schemes/exchange_registry: every scheme the planner can choose has an
// exchange registered in the linked program (the schemes' archive is linked
// whole; an object the linker dropped would leave its scheme out).
#include <gtest/gtest.h>

#include "dist/schemes/exchange_registry.h"

namespace poseidon {
namespace {

TEST(ExchangeRegistry, EverySchemeHasAnExchange) {
  for (dist::Scheme scheme : {dist::Scheme::ps, dist::Scheme::sfb, dist::Scheme::allreduce, dist::Scheme::lowrank})
    EXPECT_TRUE(dist::ExchangeRegistry::instance().has(scheme)) << dist::scheme_name(scheme);
}

}  // namespace
}  // namespace poseidon
