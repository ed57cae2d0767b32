// The error path of core/cuda/check.h.
#include "core/cuda/check.h"

#include "core/error.h"

namespace poseidon::cuda {

void fail(const char* library, const char* call, const char* file, int line, const std::string& message) {
  throw Error(std::string(library) + " error: " + message + " (" + call + " at " + file + ":" + std::to_string(line) +
              ")");
}

const char* cublas_message(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown status";
  }
}

}  // namespace poseidon::cuda
