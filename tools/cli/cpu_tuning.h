// Process-level CPU tuning that must happen before any library initialises.
#pragma once

namespace poseidon {

// Settings that OpenBLAS and libgomp read only while they load, before main,
// so this sets them in the environment and restarts the program once
// (execv of /proc/self/exe) when one is missing. Each is left alone where the
// user has set it. Returns normally when nothing needs to change, or when the
// restart is impossible (the run then goes on with the libraries' defaults).
//
// - OPENBLAS_CORETYPE: OpenBLAS 0.3.21 (Debian 12) does not recognise some
//   recent CPUs, notably as presented by hypervisors, and falls back to its
//   generic SSE3 kernels, about three times slower. When detection failed
//   and the CPU has AVX-512 or AVX2, the matching core type is set.
// - The OpenMP wait, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set: a
//   thread that reaches the end of a parallel region spins GOMP_SPINCOUNT=3000
//   times before it sleeps (libgomp's default is ~300,000; passive is 0).
//   Measured on 2 CPUs (docs/BENCHMARK_HISTORY.md, "Threads on shared cores"):
//   against passive waits, the short spin makes a step 2 to 15% faster on
//   cores the run has to itself (the next region starts before a sleeping
//   thread would have woken) and at most 7% slower with one CPU busy
//   elsewhere, where libgomp's long default spin ran 1.9x slower. Several
//   ranks of one MPI job on this host share its cores, so each of them waits
//   passively (OMP_WAIT_POLICY=passive). The thread count stays libgomp's
//   default: one per CPU in the process's affinity mask.
void apply_cpu_settings(char** argv);

}  // namespace poseidon
