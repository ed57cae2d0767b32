// dist/comm: the job's shape as the launcher describes it, and MPI failures
// turned into exceptions that name the call.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/dist/test_world.h"

namespace poseidon::testing {

TEST(Comm, RankAndSizeMatchTheLauncher) {
  const dist::World& world = test_world();
  ASSERT_TRUE(world.uses_mpi());
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(world.size(), size ? std::atoi(size) : 1);
  EXPECT_EQ(world.rank(), rank ? std::atoi(rank) : 0);
  EXPECT_GE(world.thread_level(), MPI_THREAD_SERIALIZED);
  if (size) {
    EXPECT_TRUE(dist::launched_by_mpi());
  }
}

// Every rank of these tests runs on this one host.
TEST(Comm, LocalRankIsThePlaceOnThisHost) {
  const dist::World& world = test_world();
  const char* local_rank = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_EQ(world.local_rank(), local_rank ? std::atoi(local_rank) : 0);
  EXPECT_EQ(world.local_size(), local_size ? std::atoi(local_size) : 1);
  EXPECT_EQ(world.local_size(), world.size());
  EXPECT_EQ(world.local_rank(), world.rank());
}

TEST(Comm, FailedCallThrowsWithItsNameAndMpisMessage) {
  dist::Comm comm(test_world());
  float x = 0;
  try {
    POSEIDON_MPI(MPI_Send(&x, 1, MPI_FLOAT, comm.size() + 3, 0, comm.handle()));
    FAIL() << "a send to a rank that does not exist succeeded";
  } catch (const dist::CommError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("MPI_Send failed: ", 0), 0u) << what;
    EXPECT_GT(what.size(), std::string("MPI_Send failed: ").size()) << what;
  }
}

TEST(Comm, PrivateCommunicatorSpansTheWorld) {
  dist::Comm comm(test_world());
  EXPECT_EQ(comm.size(), test_world().size());
  EXPECT_EQ(comm.rank(), test_world().rank());
  EXPECT_GE(comm.max_tag(), 32767);
}

// A duplicate is a communicator of its own: a message sent on one is never
// received on the other, and moving a Comm keeps the handle without a copy.
TEST(Comm, DuplicateIsSeparateAndMovesKeepTheHandle) {
  dist::Comm comm(test_world());
  dist::Comm copy = comm.duplicate();
  EXPECT_NE(copy.handle(), comm.handle());
  EXPECT_EQ(copy.size(), comm.size());
  EXPECT_EQ(copy.rank(), comm.rank());
  int result = MPI_UNEQUAL;
  POSEIDON_MPI(MPI_Comm_compare(comm.handle(), copy.handle(), &result));
  EXPECT_EQ(result, MPI_CONGRUENT);

  const MPI_Comm handle = copy.handle();
  dist::Comm moved(std::move(copy));
  EXPECT_EQ(moved.handle(), handle);
  EXPECT_EQ(copy.handle(), MPI_COMM_NULL);

  // Rank r sends to itself on `comm`; nothing arrives on the duplicate.
  int value = 42, flag = 1;
  MPI_Request send;
  POSEIDON_MPI(MPI_Isend(&value, 1, MPI_INT, comm.rank(), 5, comm.handle(), &send));
  POSEIDON_MPI(MPI_Iprobe(comm.rank(), 5, moved.handle(), &flag, MPI_STATUS_IGNORE));
  EXPECT_EQ(flag, 0);
  int got = 0;
  POSEIDON_MPI(MPI_Recv(&got, 1, MPI_INT, comm.rank(), 5, comm.handle(), MPI_STATUS_IGNORE));
  POSEIDON_MPI(MPI_Wait(&send, MPI_STATUS_IGNORE));
  EXPECT_EQ(got, 42);
}

}  // namespace poseidon::testing
