// Stopping training on a signal: the first SIGTERM or SIGINT asks the
// training loop to stop at the next iteration boundary (it writes a
// checkpoint and exits 0; in an MPI job every rank stops together:
// dist/runtime/stop_vote.h); a second one ends the process at once.
//
// The signals never interrupt a thread that computes. A handler runs on the
// stack of the thread the signal lands on, and the kernel writes its frame
// below that thread's stack pointer; some JIT kernels (oneDNN's float32
// GEMM among them) point the stack pointer into heap memory while they run,
// so a frame written there corrupts the heap. So the signals are blocked in
// the calling thread, and in every thread it starts from then on, and one
// thread of their own takes them with sigwait. A handler stays installed
// for threads a library started earlier with the signals open.
#pragma once

namespace poseidon {

// Training only (the other verbs keep the defaults); call it before the
// process starts any other thread (MPI, OpenMP, the data loader). A signal
// that comes before the first iteration stops training after it.
void catch_stop_signals();
// The signal that asked to stop (SIGTERM, SIGINT), or 0.
int stop_signal();
// "SIGTERM", "SIGINT".
const char* stop_signal_name(int signal);

}  // namespace poseidon
