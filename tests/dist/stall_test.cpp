// dist/stall: ranks that keep polling answer each other's questions, even
// when all ask at once; a rank that does not poll is named as silent, and one
// with fewer iterations as behind.
#include "dist/runtime/stall.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/dist/test_world.h"

namespace poseidon::testing {

TEST(StallInspector, RanksAskingAtOnceHearEachOtherAndNameThoseBehind) {
  const int me = test_world().rank(), n = test_world().size();
  dist::StallInspector inspector{dist::Comm(test_world())};
  dist::Comm sync(test_world());  // made before: a rank blocked in a collective could not answer
  const std::string found = inspector.inspect(/*progress=*/me, /*grace=*/20);
  // Everyone answered, so only lower ranks (fewer iterations) are named.
  for (int r = 0; r < n; ++r) {
    const bool named = found.find("rank " + std::to_string(r) + " ") != std::string::npos;
    EXPECT_EQ(named, r < me) << "rank " << r << " in: " << found;
  }
  EXPECT_EQ(found.find("not answer"), std::string::npos) << found;
  // Questions of ranks that ask later are answered until every rank is done.
  MPI_Request barrier;
  POSEIDON_MPI(MPI_Ibarrier(sync.handle(), &barrier));
  for (int done = 0; !done;) {
    inspector.answer(me);
    POSEIDON_MPI(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE));
  }
}

TEST(StallInspector, RankThatDoesNotPollIsNamedSilent) {
  const int me = test_world().rank(), n = test_world().size();
  if (n < 2) GTEST_SKIP() << "needs two ranks";
  dist::StallInspector inspector{dist::Comm(test_world())};
  std::string found;
  if (me == n - 1)
    std::this_thread::sleep_for(std::chrono::seconds(3));
  else
    found = inspector.inspect(0, 1);
  dist::Comm sync(test_world());
  POSEIDON_MPI(MPI_Barrier(sync.handle()));
  if (me != n - 1) {
    EXPECT_NE(found.find("rank " + std::to_string(n - 1) + " does not answer"), std::string::npos) << found;
  }
}

}  // namespace poseidon::testing
