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
// - OMP_WAIT_POLICY=passive unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set:
//   a thread waiting at the end of a parallel region sleeps at once instead
//   of spinning (libgomp's default spins ~300,000 times first). On cores
//   shared with other busy processes the spinning threads take the time
//   slices the working ones need, and a 2-thread step ran 4 to 24 times
//   slower than with passive waits (docs/BENCHMARKS.md, "Threads on shared
//   cores"). The thread count stays libgomp's default: one per CPU in the
//   process's affinity mask.
void apply_cpu_settings(char** argv);

}  // namespace poseidon
