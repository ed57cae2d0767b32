// Process-level CPU tuning that must happen before any library initialises.
#pragma once

namespace poseidon {

// OpenBLAS 0.3.21 (Debian 12) does not recognise some recent CPUs, notably as
// presented by hypervisors, and falls back to its generic SSE3 kernels, about
// three times slower. It reads OPENBLAS_CORETYPE only while loading, before
// main, so when detection failed and the CPU has AVX-512 or AVX2 this
// restarts the program once with the matching core type. Returns normally
// when nothing needs to change (or the restart is impossible).
void ensure_blas_kernels(char** argv);

// The OpenMP wait policy the binary runs under unless the user sets one
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT): passive, so that a thread waiting at
// the end of a parallel region sleeps instead of spinning. libgomp's default
// spins for about 300,000 iterations first; on cores shared with other busy
// processes the spinning threads take the time slices the working ones need,
// and two threads ran up to 2.8 times slower than one (docs/BENCHMARKS.md,
// "Threads on shared cores"). libgomp reads the setting while it loads, so
// cpu_tuning.cpp applies it from the executable's .preinit_array, which runs
// before any shared library's initialiser. The thread count is left to
// libgomp: one thread per CPU the process may run on (its affinity mask).
inline constexpr const char* kDefaultWaitPolicy = "passive";

}  // namespace poseidon
