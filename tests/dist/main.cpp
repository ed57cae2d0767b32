// Test main for dist/: starts MPI before GoogleTest runs and finalises it after.
#include <gtest/gtest.h>

#include "core/math.h"
#include "layers/dnnl_support.h"
#include "tests/dist/test_world.h"

namespace poseidon::testing {
namespace {
const dist::World* world = nullptr;
}
const dist::World& test_world() { return *world; }
}  // namespace poseidon::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  poseidon::dist::World world(poseidon::dist::World::Start::always);
  poseidon::testing::world = &world;
  // Several ranks share the machine's cores: one compute thread each.
  poseidon::set_num_threads(1);
  // And every rank multiplies bf16 with rank 0's CPU kernels, as training
  // does (tools/cli/trainer_checkpoint.cpp): the tests' one-process
  // references are rank 0's.
  poseidon::adopt_cpu_bf16_kernels(world.value_of_rank_zero(poseidon::dnnl_runs_bf16_kernels()) != 0);
  return RUN_ALL_TESTS();
}
