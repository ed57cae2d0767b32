// `poseidon info`: what this binary was built with and what it can use here,
// so a report or a bug can say which libraries and GPUs were involved.
#include <cblas.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>
#ifdef POSEIDON_HAVE_IMAGES
#include <opencv2/core/version.hpp>
#endif
#ifdef POSEIDON_HAVE_DNNL
#include <dnnl.h>
#endif

#include "core/device_info.h"
#include "core/device_memory.h"
#include "dist/runtime/comm.h"
#include "layers/dnnl_support.h"
#include "tools/cli/commands.h"

namespace poseidon {

namespace {
struct Entry {
  std::string name, value;
};

// How idle OpenMP threads wait, as the process runs: the environment's
// setting or the one the binary chose at start (tools/cli/cpu_tuning.h).
std::string openmp_waits() {
  std::string waits;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* value = std::getenv(name)) waits += (waits.empty() ? "" : ", ") + std::string(name) + "=" + value;
  return waits.empty() ? "the OpenMP runtime's default" : waits;
}

std::vector<Entry> build_entries() {
  std::vector<Entry> out;
  out.push_back({"poseidon", "0.1"});
  out.push_back({"C++ compiler", __VERSION__});
  out.push_back({"CUDA backend", device_memory::cuda_built() ? "built" : "not built"});
  for (const auto& lib : device_info::cuda_libraries()) out.push_back({lib.name, lib.version});
  out.push_back({"MPI", dist::mpi_library_version()});
  out.push_back({"BLAS", openblas_get_config()});
#ifdef POSEIDON_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  out.push_back({"oneDNN", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch)});
  // What its kernels run on this CPU (ONEDNN_MAX_CPU_ISA lowers it):
  // bf16 is fastest on avx512_core_amx.
  out.push_back({"oneDNN ISA", dnnl_cpu_isa()});
#else
  out.push_back({"oneDNN", "not built (convolutions use im2col + GEMM)"});
#endif
  out.push_back({"CPU bf16", cpu_bf16_kernels()});
#ifdef POSEIDON_HAVE_IMAGES
  out.push_back({"OpenCV", CV_VERSION});
#else
  out.push_back({"OpenCV", "not built (no image sources: POSEIDON_IMAGES=OFF)"});
#endif
  out.push_back({"CPU threads", std::to_string(std::thread::hardware_concurrency())});
  out.push_back({"OpenMP waits", openmp_waits()});
  return out;
}
}  // namespace

int cmd_info(bool json) {
  const auto entries = build_entries();
  const auto gpus = device_info::visible_gpus();
  if (json) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& e : entries) out[e.name] = e.value;
    out["gpus"] = nlohmann::json::array();
    for (const auto& g : gpus)
      out["gpus"].push_back({{"index", g.index},
                             {"name", g.name},
                             {"memory_bytes", g.memory_bytes},
                             {"compute_capability", std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor)},
                             {"multiprocessors", g.multiprocessors}});
    if (gpus.empty()) out["gpus_unavailable"] = device_memory::cuda_unavailable_reason();
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  for (const auto& e : entries) std::printf("%-18s %s\n", e.name.c_str(), e.value.c_str());
  if (gpus.empty()) std::printf("%-18s none: %s\n", "GPUs", device_memory::cuda_unavailable_reason().c_str());
  for (const auto& g : gpus)
    std::printf("cuda:%-13d %s, %.1f GiB, compute capability %d.%d, %d multiprocessors\n", g.index, g.name.c_str(),
                g.memory_bytes / double(1 << 30), g.compute_major, g.compute_minor, g.multiprocessors);
  return 0;
}

}  // namespace poseidon
