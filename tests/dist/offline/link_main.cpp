// The planner, the cost models and the simulator linked alone, every object
// of their archives included: tests/dist/offline/check_no_mpi.sh reads this
// executable's link to show that they need no MPI (the build itself fails
// first if any of their objects calls MPI, as no MPI library is linked).
int main() { return 0; }
