// Shared oneDNN set-up of the layers (see dnnl_support.h).
#include "layers/dnnl_support.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "layers/bf16_dot_rate.h"

namespace poseidon {

namespace {
std::optional<bool>& adopted_bf16_kernels() {
  static std::optional<bool> choice;
  return choice;
}
}  // namespace

void adopt_cpu_bf16_kernels(std::optional<bool> onednn) { adopted_bf16_kernels() = onednn; }

#ifdef POSEIDON_HAVE_DNNL

const dnnl::engine& dnnl_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::primitive_attr dnnl_user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::primitive_attr dnnl_forward_attr(bool relu) {
  dnnl::primitive_attr attr = dnnl_user_scratchpad();
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  return attr;
}

bool dnnl_uses_avx512() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

// The dot product's rate from which oneDNN's bfloat16 kernels are taken:
// midway between 2, where vdpbf16ps issues as often as vfmadd231ps and
// doubles the products, and 0.5, measured on a core that issues it at a
// quarter of the rate, where float32 kernels on rounded operands ran bf16
// steps 1.15 to 1.7 times as fast as its bfloat16 kernels
// (docs/BENCHMARK_HISTORY.md).
constexpr double kBf16DotRateThatPays = 1.5;

bool dnnl_runs_bf16_kernels() {
  if (const std::optional<bool>& adopted = adopted_bf16_kernels()) return *adopted && dnnl_uses_avx512();
  if (const char* forced = std::getenv("POSEIDON_CPU_BF16_KERNELS")) {
    const std::string choice = forced;
    POSEIDON_REQUIRE(choice == "onednn" || choice == "float32")
        << "POSEIDON_CPU_BF16_KERNELS=" << choice << ": expected onednn or float32";
    return choice == "onednn" && dnnl_uses_avx512();  // none before AVX-512
  }
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx512_core_amx) return true;
  return isa == dnnl::cpu_isa::avx512_core_bf16 && bf16_dot_rate() >= kBf16DotRateThatPays;
}

bool dnnl_is_reference(const char* impl) { return std::strncmp(impl, "ref", 3) == 0; }

dnnl::matmul::primitive_desc dnnl_matmul(const dnnl::matmul::desc& desc, const dnnl::primitive_attr& attr,
                                         const char* preferred) {
  // The descriptor iterates over the implementations and reads `desc` as it
  // goes, so `desc` is the caller's, alive until this returns.
  dnnl::matmul::primitive_desc candidate(desc, attr, dnnl_cpu_engine());
  if (!preferred) return candidate;
  do {
    if (std::strncmp(candidate.impl_info_str(), preferred, std::strlen(preferred)) == 0) return candidate;
  } while (candidate.next_impl());
  return dnnl::matmul::primitive_desc(desc, attr, dnnl_cpu_engine());
}

bool dnnl_is_packed(const dnnl::memory::desc& desc, const PackedB& b) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.ndims != 2 || d.format_kind != dnnl_blocked || d.offset0 != 0 || d.extra.flags != 0) return false;
  const dnnl_blocking_desc_t& blk = d.format_desc.blocking;
  return blk.inner_nblks == 3 && blk.inner_blks[0] == 16 && blk.inner_idxs[0] == 0 && blk.inner_blks[1] == 64 &&
         blk.inner_idxs[1] == 1 && blk.inner_blks[2] == 2 && blk.inner_idxs[2] == 0 && blk.strides[0] == 2048 &&
         blk.strides[1] == b.padded_k() / 32 * 2048 && d.padded_dims[0] == b.padded_k() &&
         d.padded_dims[1] == b.padded_n() && desc.get_size() == static_cast<size_t>(b.elements()) * 2;
}

std::string dnnl_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "generic (no JIT kernels)";
  }
}

#else

std::string dnnl_cpu_isa() { return "not built"; }

bool dnnl_uses_avx512() { return false; }

bool dnnl_runs_bf16_kernels() { return false; }

#endif  // POSEIDON_HAVE_DNNL

std::string cpu_bf16_kernels() {
  const std::string isa = dnnl_cpu_isa();
  char measured[80];
  std::snprintf(measured, sizeof measured, "vdpbf16ps multiplies at %.2f times vfmadd231ps' rate", bf16_dot_rate());
  if (adopted_bf16_kernels())
    return dnnl_runs_bf16_kernels() ? "oneDNN's bfloat16 kernels (rank 0's choice, which every rank takes)"
                                    : "float32 kernels on operands rounded to bfloat16 (rank 0's choice, which "
                                      "every rank takes, or no bfloat16 kernels before AVX-512)";
  if (std::getenv("POSEIDON_CPU_BF16_KERNELS"))
    return dnnl_runs_bf16_kernels() ? "oneDNN's bfloat16 kernels (as POSEIDON_CPU_BF16_KERNELS asks)"
                                    : "float32 kernels on operands rounded to bfloat16 (as "
                                      "POSEIDON_CPU_BF16_KERNELS asks, or no bfloat16 kernels before AVX-512)";
  if (dnnl_runs_bf16_kernels())
    return isa == "avx512_core_amx" ? "oneDNN's bfloat16 kernels (AMX)"
                                    : "oneDNN's bfloat16 kernels (" + std::string(measured) + ")";
  const std::string why = isa == "not built"    ? "this build has no oneDNN"
                          : !dnnl_uses_avx512() ? "no bfloat16 kernels in oneDNN before AVX-512; its instruction "
                                                  "set here is " +
                                                      isa
                          : bf16_dot_rate() == 0 ? "no bfloat16 dot product (avx512_bf16) on this CPU: oneDNN "
                                                   "would emulate it"
                                                 : std::string(measured) + ", too slow to pay";
  return "float32 kernels on operands rounded to bfloat16 (" + why + "): bf16's numbers at float32's speed";
}

}  // namespace poseidon
