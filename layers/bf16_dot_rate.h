// How fast this CPU's bfloat16 dot product multiplies next to its float32
// fused multiply-add. Without AMX, oneDNN's bfloat16 kernels are built on
// AVX-512's vdpbf16ps, two products per 32-bit lane where vfmadd231ps does
// one: they pay only where the CPU issues the first about as often as the
// second. Some cores issue vdpbf16ps at a quarter of the rate of their two
// 512-bit FMA units, and there float32 kernels on rounded operands run bf16
// layers faster; no instruction-set flag tells the two apart, so it is
// measured (docs/CONFIG.md, Precision).
#pragma once

namespace poseidon {

// Bfloat16 multiply-adds per second through vdpbf16ps over float32 ones
// through vfmadd231ps, on one core, both on 512-bit registers: about 2 where
// they issue at the same rate. Measured once per process (three times a
// quarter of a millisecond, a millisecond apart); 0 where the CPU has no
// avx512_bf16.
double bf16_dot_rate();

}  // namespace poseidon
