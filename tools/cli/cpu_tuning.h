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

}  // namespace poseidon
