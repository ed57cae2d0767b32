// Shared oneDNN set-up of the layers (see dnnl_support.h).
#include "layers/dnnl_support.h"

#include <cstring>

namespace poseidon {

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

bool dnnl_has_bf16_kernels() { return dnnl_uses_avx512(); }

bool dnnl_is_reference(const char* impl) { return std::strncmp(impl, "ref", 3) == 0; }

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

bool dnnl_has_bf16_kernels() { return false; }

#endif  // POSEIDON_HAVE_DNNL

}  // namespace poseidon
