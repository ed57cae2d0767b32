// How the GPU convolution (layers/conv.cu) chooses cuDNN's algorithms:
// cuDNN's Find ranks each direction's algorithms by running them once; of
// that ranking the layer keeps those that run with the math asked for and
// whose workspace fits the context's limit, deterministic ones first where
// asked, and moves to the next when cuDNN refuses one as it runs.
// POSEIDON_CUDNN_LOG=1 prints each ranking and the choice to stderr.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/error.h"

namespace poseidon::conv_algorithms {

// cuDNN's descriptors take int sizes.
inline int cudnn_int(int64_t v, const std::string& layer) {
  if (v < 0 || v > INT_MAX)
    throw Error(layer + ": convolution size " + std::to_string(v) + " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

// Whether cuDNN refused a call, having written nothing: NOT_SUPPORTED or,
// from cuDNN 9, one of the finer codes of its category (a shape, a layout,
// shared memory).
inline bool refused(cudnnStatus_t status) { return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED; }

// How the convolution multiplies: float32 with FMA math only, float32 with
// TF32 tensor cores allowed, or bfloat16 operands on tensor cores.
enum class ConvMath { fp32, tf32, bf16 };

// The math type cuDNN ranks the algorithms under.
inline cudnnMathType_t ranking_math(ConvMath m) { return m == ConvMath::fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH; }

inline const char* math_name(ConvMath m) {
  switch (m) {
    case ConvMath::fp32:
      return "FP32 (non-TF32)";
    case ConvMath::tf32:
      return "TF32";
    case ConvMath::bf16:
      return "bfloat16";
  }
  return "";
}

// One algorithm with the math type it runs with and the workspace it needs.
template <class Algo>
struct AlgoChoice {
  Algo algo{};
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t workspace = 0;
};

// One direction's usable algorithms, best first; `at` moves past those that
// cuDNN refuses when they run.
template <class Algo>
struct AlgoRanking {
  std::vector<AlgoChoice<Algo>> usable;
  size_t at = 0;
};

// Prints cuDNN's ranking of one direction and the algorithm chosen, where
// POSEIDON_CUDNN_LOG=1: "algorithm:ms:D|N(deterministic or not):MiB".
template <class Perf, class Algo>
void log_ranking(const std::vector<Perf>& ranked, const AlgoRanking<Algo>& chosen, const std::string& what) {
  static const bool on = [] {
    const char* v = std::getenv("POSEIDON_CUDNN_LOG");
    return v && std::string(v) == "1";
  }();
  if (!on) return;
  std::string line = what + ": chose " + std::to_string(static_cast<int>(chosen.usable.front().algo)) + "; ranked";
  char entry[96];
  for (const Perf& p : ranked) {
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    std::snprintf(entry, sizeof entry, " %d:%.3f:%c:%zu", static_cast<int>(p.algo), p.time,
                  p.determinism == CUDNN_DETERMINISTIC ? 'D' : 'N', p.memory >> 20);
    line += entry;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

// The usable entries of cuDNN's ranking (best first). `workspace_of(algo,
// math, &bytes)` says whether the algorithm runs with that math type on this
// shape, and with how much workspace. Deterministic entries come first when
// asked; FP16 conversion is never allowed, tensor-core math only with TF32
// on or with bfloat16 operands (whose products float32 holds exactly).
template <class Perf, class WorkspaceOf>
auto usable_algos(const std::vector<Perf>& ranked, ConvMath conv_math, bool prefer_deterministic,
                  WorkspaceOf workspace_of, const std::string& what) {
  const bool fma_only = conv_math == ConvMath::fp32;
  AlgoRanking<decltype(Perf{}.algo)> out;
  for (int pass = prefer_deterministic ? 0 : 1; pass < 2; ++pass)
    for (const Perf& p : ranked) {
      if (p.status != CUDNN_STATUS_SUCCESS) continue;
      if (prefer_deterministic && (pass == 0) != (p.determinism == CUDNN_DETERMINISTIC)) continue;
      if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (fma_only && p.mathType == CUDNN_TENSOR_OP_MATH) continue;
      // With FMA math only every call runs with FMA math, also for entries
      // ranked under DEFAULT math, which would let cuDNN use TF32 tensor cores.
      const cudnnMathType_t math = fma_only ? CUDNN_FMA_MATH : p.mathType;
      size_t bytes = 0;
      if (!workspace_of(p.algo, math, &bytes) || bytes > cuda::Context::kWorkspaceLimit) continue;
      out.usable.push_back({p.algo, math, bytes});
    }
  if (out.usable.empty())
    throw Error(what + ": cuDNN offers no " + math_name(conv_math) + " algorithm within the " +
                std::to_string(cuda::Context::kWorkspaceLimit >> 20) + " MiB workspace limit");
  return out;
}

// Runs `call(choice, workspace)` with the ranking's current algorithm, and
// with the next ones while cuDNN refuses it (it then has written nothing, so
// the retry starts from the same buffers).
template <class Algo, class Call>
void run_ranked(AlgoRanking<Algo>& ranking, cuda::Context& gpu, cudnnConvolutionDescriptor_t conv, Call call,
                const std::string& what) {
  for (; ranking.at < ranking.usable.size(); ++ranking.at) {
    const AlgoChoice<Algo>& c = ranking.usable[ranking.at];
    POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, c.math));
    const cudnnStatus_t status = call(c, gpu.workspace(c.workspace));
    if (refused(status)) continue;
    if (status != CUDNN_STATUS_SUCCESS)
      throw Error(what + ": cuDNN error: " + cudnnGetErrorString(status) + " (algorithm " +
                  std::to_string(static_cast<int>(c.algo)) + ")");
    return;
  }
  throw Error(what + ": cuDNN supports none of the " + std::to_string(ranking.usable.size()) +
              " algorithms it ranked for this shape");
}

// The largest workspace, within the limit, that any of the first `count`
// algorithms asks for: what cuDNN's Find may use while it ranks them.
template <class WorkspaceOf>
size_t find_workspace(int count, WorkspaceOf workspace_of) {
  size_t most = 0;
  for (int a = 0; a < count; ++a) {
    size_t bytes = 0;
    if (workspace_of(a, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= cuda::Context::kWorkspaceLimit)
      most = std::max(most, bytes);
  }
  return most;
}

}  // namespace poseidon::conv_algorithms
