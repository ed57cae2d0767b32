// What the layers' oneDNN paths (conv_dnnl, fc_dnnl) share: the one CPU
// engine, the attribute that keeps primitives from allocating scratch space
// at execution, the test for oneDNN's reference (naive loop) kernels,
// which the layers' own code beats, the choice among oneDNN's matrix
// product implementations, and the test for the blocked layout of
// bf16_pack.h. Also the instruction set oneDNN picked for this CPU, and
// whether bf16 layers use its bfloat16 kernels, which `poseidon info`
// reports.
#pragma once

#include <optional>
#include <string>

#include "layers/bf16_pack.h"

#ifdef POSEIDON_HAVE_DNNL
#include <dnnl.hpp>
#endif

namespace poseidon {

// "avx512_core_amx" and the like; "not built" without oneDNN.
std::string dnnl_cpu_isa();

// Whether bf16 layers run oneDNN's bfloat16 kernels on this CPU: where
// they multiply faster than its float32 kernels, that is with AMX, or with
// AVX-512 BF16 whose dot product does at least 1.5 times as many
// multiply-adds per second as float32's (measured, bf16_dot_rate.h).
// Elsewhere (bfloat16 emulated on plain AVX-512, reference loops before it,
// or a slow dot product) conv and fc run float32 kernels on operands
// rounded to bfloat16. POSEIDON_CPU_BF16_KERNELS=onednn or =float32 in the
// environment decides instead (onednn where it has them: from AVX-512
// on). A choice adopted by adopt_cpu_bf16_kernels decides before either.
// False without oneDNN.
bool dnnl_runs_bf16_kernels();

// Makes `onednn` this process's choice (still only where oneDNN has
// bfloat16 kernels: from AVX-512 on); nullopt returns to the environment's
// or the measured one. Called before any layer prepares its kernels: every
// rank of a job takes rank 0's choice, since the two kernels' products
// differ in their last bits and a rank measuring under load could choose
// otherwise than the others.
void adopt_cpu_bf16_kernels(std::optional<bool> onednn);

// What bf16 layers compute with on this CPU and why, in a sentence, for
// `poseidon info` and `poseidon train`'s warning.
std::string cpu_bf16_kernels();

// Whether oneDNN's kernels on this CPU use AVX-512 (avx512_core or later);
// false without oneDNN.
bool dnnl_uses_avx512();

#ifdef POSEIDON_HAVE_DNNL

// oneDNN's CPU engine is stateless apart from its kernel caches: one serves
// every layer. Its OpenMP threads are those of the calling thread, so the
// process-wide thread count (core/math.h set_num_threads) applies to it.
const dnnl::engine& dnnl_cpu_engine();

// Scratch space comes from a buffer the caller makes in advance, so that
// executing a primitive never asks the library for memory of its own.
dnnl::primitive_attr dnnl_user_scratchpad();
// The same, for a forward primitive that also applies a fused ReLU
// (core/relu_fusion.h) to its output as it writes it, when `relu` is set.
// oneDNN's ReLU keeps a NaN a NaN where the ReLU layer writes 0.
dnnl::primitive_attr dnnl_forward_attr(bool relu);

// True for an implementation name of oneDNN's reference kernels.
bool dnnl_is_reference(const char* impl);

// What the float32 backward matrix products of the fc layer and of
// convolutions on small images ask oneDNN for: its JIT GEMM, faster on them
// than its first choice on AVX-512, its brgemm kernels (measurements in
// fc_dnnl.cpp and conv_matmul.cpp). Before AVX-512 it is the first choice.
constexpr const char* kDnnlFloat32BackwardKernels = "gemm:jit";

// A matrix product: the first of oneDNN's implementations for `desc` whose
// name starts with `preferred` (such as "gemm:jit"), where it offers one,
// else its own first choice; oneDNN's first choice with a null `preferred`.
dnnl::matmul::primitive_desc dnnl_matmul(const dnnl::matmul::desc& desc, const dnnl::primitive_attr& attr,
                                         const char* preferred);

// Whether oneDNN laid out a matrix product's B[b.k, b.n] as bf16_pack.h
// writes it.
bool dnnl_is_packed(const dnnl::memory::desc& desc, const PackedB& b);

#endif  // POSEIDON_HAVE_DNNL

}  // namespace poseidon
