// GPU facts (see core/device_info.h): library versions as compiled against
// and as loaded, and the devices the runtime can see.
#include "core/device_info.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <utility>

#include "core/device_memory.h"

namespace poseidon::device_info {

namespace {
// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::vector<std::pair<std::string, std::function<std::string()>>>& reported_libraries() {
  static std::vector<std::pair<std::string, std::function<std::string()>>> libraries;
  return libraries;
}
}  // namespace

void report_library(std::string name, std::function<std::string()> version) {
  reported_libraries().emplace_back(std::move(name), std::move(version));
}

std::vector<Library> cuda_libraries() {
  std::vector<Library> out;
  out.push_back({"CUDA (built with)", cuda_version(CUDART_VERSION)});
  int runtime = 0, driver = 0;
  out.push_back({"CUDA runtime", cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_version(runtime) : "none"});
  out.push_back({"CUDA driver", cudaDriverGetVersion(&driver) == cudaSuccess ? cuda_version(driver) : "none"});
  cudaGetLastError();
  // cuDNN 9 encodes 10000 * major + 100 * minor + patch.
  size_t cudnn = cudnnGetVersion();
  out.push_back({"cuDNN", std::to_string(cudnn / 10000) + "." + std::to_string(cudnn % 10000 / 100) + "." +
                              std::to_string(cudnn % 100)});
  int major = 0, minor = 0, patch = 0;
  const bool cublas = cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
                      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
                      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS;
  out.push_back({"cuBLAS", cublas ? std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch)
                                  : "none"});
  for (const auto& [name, version] : reported_libraries()) out.push_back({name, version()});
  return out;
}

std::vector<Gpu> visible_gpus() {
  std::vector<Gpu> out;
  const int count = device_memory::cuda_device_count();
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor, prop.multiProcessorCount});
  }
  return out;
}

}  // namespace poseidon::device_info
